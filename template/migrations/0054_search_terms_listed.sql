-- The search index without its record index. search_terms (0040) had a second B-tree,
-- search_terms_record (record_id), only so that erasing a report's personal data and archiving
-- its case could find the report's term rows; it cost as many bytes as the table itself (about
-- 1.2 KB per report for the hot window). A report now lists its own terms: `reports.search_terms`
-- is the JSON array of the keyed terms (20 hex digits each, as in search_terms.term; "[]" when the
-- report has none, NULL once its personal data is erased), written by intake in the report's own
-- INSERT.
-- Erasure and the case archive reach each term row by the table's primary key (installation, term,
-- the report's created_at, the report's id) from that list. The terms are keyed hashes (no word or
-- identifier in plaintext), like the rows they point at.
--
-- Storage tier: hot, with its report (archived with the case, erased with the personal data).
ALTER TABLE reports ADD COLUMN search_terms TEXT;

-- Reports written before this migration: their lists, from the rows of the index (one pass over
-- search_terms, which holds only the reports of the hot window).
UPDATE reports SET search_terms = g.terms
FROM (SELECT record_id, json_group_array(term) AS terms FROM (SELECT record_id, term FROM search_terms ORDER BY record_id, term) GROUP BY record_id) AS g
WHERE reports.id = g.record_id;

-- Kept reports without terms: an empty list.
UPDATE reports SET search_terms = '[]' WHERE search_terms IS NULL AND personal_data_erased_at IS NULL;

-- A worker older than this migration may still take reports between it and the deploy of the code
-- that writes the list (a deploy applies migrations first): those rows have no list. The schedule
-- (cases.list_search_terms) lists them from their opened personal data, through this index, which
-- holds only them (empty once they are listed); erasure and the case archive list any they meet.
CREATE INDEX reports_terms_unlisted ON reports (created_at) WHERE search_terms IS NULL AND personal_data_erased_at IS NULL;

DROP INDEX IF EXISTS search_terms_record;
