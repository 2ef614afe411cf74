-- A backtest's chunks, recorded with the backtest: the BACKTESTS / FAST_BACKTESTS queues carry them,
-- and this table is their outbox. A chunk whose message was lost (a local runtime that died takes
-- its in-memory queue with it; on Cloudflare, a message past its retries) is sent again by the
-- schedule (automation.backtest_chunks) once its queue has shown no work on any chunk for a while,
-- so a running backtest never waits for good on a message that no longer exists. Report ids only:
-- no personal data.
CREATE TABLE backtest_chunks (
  backtest_id TEXT NOT NULL REFERENCES backtests(id),
  seq INTEGER NOT NULL,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  -- Which queue carries it ('fast': FAST_BACKTESTS, 'durable': BACKTESTS).
  engine TEXT NOT NULL CHECK (engine IN ('fast', 'durable')),
  report_ids_json TEXT NOT NULL,
  -- The key that started the backtest (a durable chunk's runs are started on its behalf).
  actor_key_id TEXT NOT NULL,
  queued_at TEXT NOT NULL,
  requeues INTEGER NOT NULL DEFAULT 0,
  -- The last sign of work on it: a consumer started it, is still evaluating it, or finished it.
  active_at TEXT,
  done_at TEXT,
  PRIMARY KEY (backtest_id, seq)
);
CREATE INDEX backtest_chunks_pending ON backtest_chunks (queued_at) WHERE done_at IS NULL;
-- "Has this engine's queue done anything lately?" (the sweep requeues only when it has not).
CREATE INDEX backtest_chunks_activity ON backtest_chunks (engine, active_at);
