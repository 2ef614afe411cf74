-- Console users (roles, queue access, preferences), their sessions, and one-time sign-in links.

CREATE TABLE console_users (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  email TEXT NOT NULL,
  name TEXT NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('admin', 'moderator', 'viewer')),
  queue_ids_json TEXT,
  preferences_json TEXT NOT NULL DEFAULT '{"blurMedia":true}',
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  disabled_at TEXT,
  UNIQUE (installation_id, email)
);
CREATE INDEX console_users_email ON console_users (email);

CREATE TABLE console_sessions (
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES console_users(id),
  installation_id TEXT NOT NULL REFERENCES installations(id),
  token_hash TEXT NOT NULL UNIQUE,
  csrf_token TEXT NOT NULL,
  created_at TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  revoked_at TEXT
);
CREATE INDEX console_sessions_user ON console_sessions (user_id, created_at);

CREATE TABLE console_signin_links (
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES console_users(id),
  token_hash TEXT NOT NULL UNIQUE,
  created_at TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  used_at TEXT
);
