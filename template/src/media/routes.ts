// /api/v1/media/hashes: the SHA-256 and PDQ hashes of an image sent as the request body.
import { routes } from "../http/route";
import { hashImage } from "./hashing";

export const mediaRoutes = routes().op(
  {
    method: "post",
    path: "/media/hashes",
    summary:
      "Hash an image (the body; content-type image/jpeg, image/png or image/webp; at most 8 MiB and 8,388,608 pixels): its SHA-256, and its PDQ hash with quality 0-100 and the hashes of its seven rotations and flips. Nothing is stored",
    auth: ["admin", "reports:write", "review"],
    ok: 200,
    errors: [413, 415, 422],
  },
  async (c) => {
    const { sha256, format, width, height, pdq } = await hashImage(c.req.header("content-type"), new Uint8Array(await c.req.arrayBuffer()));
    return { sha256, format, width, height, pdq };
  },
);
