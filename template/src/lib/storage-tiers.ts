// What every archive tier shares (workflows/run-archive.ts, cases/archive/case-archive.ts).

/** Days an ended run or a resolved case stays whole in D1 when the installation has not chosen (workflows/storage.ts). */
export const DEFAULT_HOT_DAYS = 7;
