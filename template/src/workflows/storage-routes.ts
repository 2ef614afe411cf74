// /api/v1/storage: the installation's hot window and what it holds in D1 and in the archive.
import { routes } from "../http/route";
import { getStorageReport, getStorageSettings, setStorageSettings } from "./storage";

export const storageRoutes = routes()
  .op({ method: "get", path: "/storage", summary: "What the installation holds in D1 (estimated per table) and in the R2 archive, and days until D1 is full at its pace", auth: ["admin", "read"], ok: 200 }, async (c) =>
    getStorageReport(c.env, c.get("actor").installationId),
  )
  .op({ method: "get", path: "/storage/settings", summary: "The hot window: days an ended run keeps its history in D1 (default 7)", auth: ["admin", "read"], ok: 200 }, async (c) =>
    getStorageSettings(c.env.DB, c.get("actor").installationId),
  )
  .op({ method: "put", path: "/storage/settings", summary: "Set the hot window (0 to 3650 days; audited); older ended runs move to the R2 archive", auth: ["admin"], body: "StorageSettings", ok: 200, errors: [422] }, async (c, { body }) =>
    setStorageSettings(c.env, c.get("actor"), { hotDays: body.hotDays }),
  );
