// Literals compared with `report.category` that the platform never stores. Intake normalises a
// category (lib/policy-categories.ts): the DSA constant `STATEMENT_CATEGORY_SCAMS_AND_FRAUD` and
// ATProto reasons are stored as `scams_and_fraud`, so `report.category == 'STATEMENT_CATEGORY_…'`
// would type-check and never be true. Checked where an expression is created (a new graph, a new
// trigger), never on versions already published.
import { normalizeCategory, POLICY_CATEGORIES } from "../lib/policy-categories";
import { expressionAst } from "./expressions";
import type { ExpressionSemantics } from "./types";

export interface CategoryLiteralProblem {
  literal: string;
  /** The stored key the literal normalises to, when it names one. */
  instead: string | null;
  message: string;
}

interface Ast {
  op: string;
  args: unknown;
}
const isAst = (value: unknown): value is Ast => typeof value === "object" && value !== null && typeof (value as Ast).op === "string";

function isReportCategory(ast: unknown): boolean {
  if (!isAst(ast) || !Array.isArray(ast.args)) return false;
  const [target, field] = ast.args as [unknown, unknown];
  const named = ast.op === "." ? field === "category" : ast.op === "[]" && isAst(field) && field.op === "value" && field.args === "category";
  return named && isAst(target) && target.op === "id" && target.args === "report";
}

function stringLiteral(ast: unknown): string | null {
  return isAst(ast) && ast.op === "value" && typeof ast.args === "string" ? ast.args : null;
}

function literalsComparedWithCategory(ast: unknown, out: string[]): void {
  if (!isAst(ast)) return;
  const args = Array.isArray(ast.args) ? (ast.args as unknown[]) : [];
  if ((ast.op === "==" || ast.op === "!=") && args.length === 2) {
    const [a, b] = args;
    const literal = isReportCategory(a) ? stringLiteral(b) : isReportCategory(b) ? stringLiteral(a) : null;
    if (literal !== null) out.push(literal);
  }
  if (ast.op === "in" && args.length === 2 && isReportCategory(args[0]) && isAst(args[1]) && args[1].op === "list" && Array.isArray(args[1].args)) {
    for (const item of args[1].args as unknown[]) {
      const literal = stringLiteral(item);
      if (literal !== null) out.push(literal);
    }
  }
  for (const arg of args) if (isAst(arg)) literalsComparedWithCategory(arg, out);
}

/** Each literal the expression compares `report.category` with that no report can hold. The expression must compile. */
export function categoryLiteralProblems(expression: string, semantics?: ExpressionSemantics): CategoryLiteralProblem[] {
  const literals: string[] = [];
  literalsComparedWithCategory(expressionAst(expression, semantics), literals);
  const known = POLICY_CATEGORIES as readonly string[];
  return literals
    .filter((literal) => !known.includes(literal))
    .map((literal) => {
      const instead = normalizeCategory(literal);
      const message = instead ? `report.category is never '${literal}': intake stores it as '${instead}'; write '${instead}' instead.` : `report.category is never '${literal}': it is one of ${known.join(", ")}.`;
      return { literal, instead, message };
    });
}
