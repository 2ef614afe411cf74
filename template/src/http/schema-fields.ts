// Field schemas the request bodies of schemas*.ts share.
export const name = { type: "string", minLength: 1, maxLength: 200 } as const;
export const identifier = { type: "string", pattern: "^[A-Za-z0-9._:-]{1,200}$" } as const;
