-- Review holes (issue 14 §4): the rule that keeps a person from QA-reviewing their own answer is
-- the authenticated principal's (`api_key:<id>`, `user:<id>`), not the reviewer name an API key's
-- client sends. qa_reviews keeps the principal that completed the original; rows written before
-- have none and fall back to the name.
ALTER TABLE qa_reviews ADD COLUMN original_principal TEXT;
