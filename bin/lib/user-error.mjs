export class UserError extends Error {}
