// /api/v1/audit-events (filtered pages of the trail) and /api/v1/audit/verify (the chain check).
import { AppError } from "../errors";
import { routes } from "../http/route";
import { AUDIT_COLUMNS, checkpointedHashAt, fromStored, GENESIS_HASH, sealAuditChain, serializeAuditRow, type AuditRow } from "./chain";
import { FULL_VERIFY_PAGE_EVENTS, verifyAuditChain, verifyAuditChainPage } from "./chain-verify";
import { lastFullVerification } from "./chain-sweep";
import { readArchivedEvents } from "./segments";
import { createdAtText, readHash } from "./stored";

export const auditRoutes = routes()
  .op(
    {
      method: "get",
      path: "/audit-events",
      summary: "The audit trail in order, with its chain hashes; ?action=&targetType=&targetId=&since=&until=&cursor=",
      auth: ["admin", "review"],
      ok: 200,
      query: { limit: { default: 100, max: 500 }, cursor: /^\d{1,15}$/u, strings: ["action", "targetType", "targetId", "since", "until"] },
    },
    async (c, { query }) => {
      const { installationId, scopes, user } = c.get("actor");
      // The trail names every queue's tasks, reports and runs: not for a console user limited to some queues.
      if (user?.queueIds) {
        throw new AppError("audit.queue_limited", "This console user is limited to some queues and cannot read the installation's audit trail; an admin or an unlimited moderator can.", { status: 403 });
      }
      await sealAuditChain(c.env, installationId, { anchor: false });
      // Golden items are mixed into queues unseen: only admins (the leads who write them) see their events.
      const admin = scopes.includes("admin") ? 1 : 0;
      const cursor = Number(query.cursor ?? 0);
      // Events archived to R2 segments (segments.ts) come first, with the same filters as the SQL below.
      const action = query.action ?? null;
      const archived = await readArchivedEvents(
        c.env,
        installationId,
        cursor,
        query.limit + 1,
        (row) =>
          (action === null || row.action === action || row.action.startsWith(`${action}.`)) &&
          (query.targetType === undefined || row.targetType === query.targetType) &&
          (query.targetId === undefined || row.targetId === query.targetId) &&
          (query.since === undefined || row.createdAt >= query.since) &&
          (query.until === undefined || row.createdAt < query.until) &&
          (admin === 1 || row.targetType !== "golden_item"),
        3,
        { targetId: query.targetId },
      );
      if (archived.rows.length > query.limit || !archived.exhausted) {
        // A full page from the segments, or as many segments read as one page may read: go on from there.
        const page = archived.rows.slice(0, query.limit);
        const next = archived.rows.length > query.limit ? page.at(-1)!.seq : archived.scannedTo;
        return { items: page.map(serializeAuditRow), nextCursor: String(next) };
      }
      // A lean (v2) row stores no prev_hash: its link is the hash of the event before it, read here
      // by seq (audit_events_seq), or, for the first event left in D1, the last hash of the newest segment.
      const { results: stored } = await c.env.DB.prepare(`
      SELECT ${AUDIT_COLUMNS},
        CASE WHEN prev_hash IS NULL AND hash IS NOT NULL THEN (SELECT p.hash FROM audit_events p WHERE p.installation_id = audit_events.installation_id AND p.seq = audit_events.seq - 1) END AS linkedHash
      FROM audit_events
      WHERE installation_id = ?1 AND seq > ?2
        AND (?3 IS NULL OR action = ?3 OR action LIKE ?3 || '.%')
        AND (?4 IS NULL OR target_type = ?4) AND (?5 IS NULL OR target_id = ?5)
        AND (?6 IS NULL OR ${createdAtText("created_at")} >= ?6) AND (?7 IS NULL OR ${createdAtText("created_at")} < ?7)
        AND (?9 = 1 OR target_type <> 'golden_item')
      ORDER BY seq LIMIT ?8
    `)
        .bind(installationId, Math.max(cursor, archived.scannedTo), action, query.targetType ?? null, query.targetId ?? null, query.since ?? null, query.until ?? null, query.limit + 1 - archived.rows.length, admin)
        .all<AuditRow & { linkedHash: string | null }>();
      const results: AuditRow[] = [];
      for (const { linkedHash, ...row } of stored) {
        const event = fromStored(row);
        if (event.prevHash === null && event.hash !== null) {
          event.prevHash = readHash(linkedHash) ?? (event.seq === 1 ? GENESIS_HASH : await checkpointedHashAt(c.env.DB, installationId, event.seq - 1));
        }
        results.push(event);
      }
      const all = [...archived.rows, ...results];
      const page = all.slice(0, query.limit);
      return { items: page.map(serializeAuditRow), nextCursor: all.length > query.limit ? String(page.at(-1)!.seq) : null };
    },
  )
  .op(
    {
      method: "get",
      path: "/audit/verify",
      summary:
        "Check the hash chain and its keyed checkpoints (R2 anchor included) and name the first broken link; ?mode=incremental (default: from the last verified checkpoint) or full (admins only; at most ?limit= events a request, then ?cursor=nextCursor goes on)",
      auth: ["admin", "review"],
      ok: 200,
      query: { enums: { mode: ["incremental", "full"] }, limit: { default: FULL_VERIFY_PAGE_EVENTS, max: FULL_VERIFY_PAGE_EVENTS }, cursor: /^\d{1,15}\.sha256:[0-9a-f]{64}\.ak_[0-9a-f]{16}\.[0-9a-f]{64}$/u },
    },
    async (c, { query }) => {
      const { installationId, scopes } = c.get("actor");
      // A full walk reads the whole trail: an admin's to ask for (the schedule does one daily anyway),
      // and in pages of at most `limit` events, each answering a cursor to go on from.
      if (query.mode === "full" && !scopes.includes("admin")) {
        throw new AppError("audit.full_verify_admin_only", "mode=full walks the whole trail and is for admins; use mode=incremental, or read lastFullVerification (the schedule's full check).", { status: 403 });
      }
      const verdict = query.mode === "full" ? await verifyAuditChainPage(c.env, installationId, query.cursor ?? undefined, query.limit) : await verifyAuditChain(c.env, installationId, "incremental");
      return { ...verdict, lastFullVerification: (await lastFullVerification(c.env.DB, installationId)) as { ok: boolean; finishedAt: string } | null };
    },
  );
