// /api/v1/audit-events (filtered pages of the trail) and /api/v1/audit/verify (the chain check).
import { Hono } from "hono";
import { AppError } from "../errors";
import { requireScope } from "../http/auth";
import type { AppEnv } from "../http/types";
import { AUDIT_COLUMNS, sealAuditChain, serializeAuditRow, verifyAuditChain, type AuditRow } from "./chain";

export const auditRoutes = new Hono<AppEnv>()
  .get("/audit-events", requireScope("admin", "review"), async (c) => {
    const { installationId } = c.get("actor");
    await sealAuditChain(c.env, installationId);
    const limit = Math.min(Math.max(Number(c.req.query("limit") ?? 100) || 100, 1), 500);
    const after = c.req.query("cursor");
    if (after !== undefined && !/^\d{1,15}$/u.test(after)) throw new AppError("request.invalid_cursor", "The cursor is not valid.", { status: 400 });
    const { results } = await c.env.DB.prepare(`
      SELECT ${AUDIT_COLUMNS} FROM audit_events
      WHERE installation_id = ?1 AND seq > ?2
        AND (?3 IS NULL OR action = ?3 OR action LIKE ?3 || '.%')
        AND (?4 IS NULL OR target_type = ?4) AND (?5 IS NULL OR target_id = ?5)
        AND (?6 IS NULL OR created_at >= ?6) AND (?7 IS NULL OR created_at < ?7)
      ORDER BY seq LIMIT ?8
    `).bind(installationId, Number(after ?? 0), c.req.query("action") ?? null, c.req.query("targetType") ?? null, c.req.query("targetId") ?? null,
      c.req.query("since") ?? null, c.req.query("until") ?? null, limit + 1).all<AuditRow>();
    const page = results.slice(0, limit);
    return c.json({ items: page.map(serializeAuditRow), nextCursor: results.length > limit ? String(page.at(-1)!.seq) : null });
  })
  .get("/audit/verify", requireScope("admin", "review"), async (c) => c.json(await verifyAuditChain(c.env, c.get("actor").installationId)));
