// NCMEC's CyberTipline vocabulary that both the node descriptors (pure, shared with the console)
// and the report builder use: the schema's incident types, spelled as NCMEC's XSD enumerates them.

/** incidentSummary/incidentType of the CyberTipline Reporting API's schema. */
export const INCIDENT_TYPES = [
  "Child Pornography (possession, manufacture, and distribution)",
  "Child Sex Trafficking",
  "Child Sex Tourism",
  "Child Sexual Molestation",
  "Misleading Domain Name",
  "Misleading Words or Digital Images on the Internet",
  "Online Enticement of Children for Sexual Act",
  "Unsolicited Obscene Material Sent to a Child",
] as const;
export type IncidentType = (typeof INCIDENT_TYPES)[number];
