-- A CyberTipline report opened at NCMEC and not finished can be cancelled there (`/retract`): the
-- platform does so when NCMEC refuses a later step of it for good (a document of the report was
-- refused, so nothing sent again is accepted), and an admin can, with a reason. `retracted_at` says
-- when; the submission's state is then 'rejected' (it may be confirmed again as a new report), its
-- files and preservation hold stay as they were.
--
-- Storage tier: kept with its submission (a column of cybertipline_submissions, no index).
ALTER TABLE cybertipline_submissions ADD COLUMN retracted_at TEXT;
