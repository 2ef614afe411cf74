// A stand-in for a Cloudflare Access team domain in tests: it publishes a JWKS at
// /cdn-cgi/access/certs and signs assertions (RS256) on request, like Access does for a user.
import { exportJWK, generateKeyPair, SignJWT } from "jose";

const keys = generateKeyPair("RS256", { extractable: true });

export default {
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const { publicKey, privateKey } = await keys;
    if (url.pathname === "/cdn-cgi/access/certs") {
      return Response.json({ keys: [{ ...(await exportJWK(publicKey)), kid: "test-key", alg: "RS256", use: "sig" }] });
    }
    if (url.pathname === "/_sign" && request.method === "POST") {
      const { email, aud, iss } = (await request.json()) as { email: string; aud: string; iss: string };
      const jwt = await new SignJWT({ email }).setProtectedHeader({ alg: "RS256", kid: "test-key" }).setIssuer(iss).setAudience(aud).setSubject(email).setIssuedAt().setExpirationTime("5m").sign(privateKey);
      return new Response(jwt);
    }
    return new Response("not found", { status: 404 });
  },
};
