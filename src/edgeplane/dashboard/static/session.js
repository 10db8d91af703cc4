// The signed-in session: opened by /session with a password or an API token, read back at each page load.
import { request, useCsrfToken } from "./api.js";

/** The current session ({user, account_id, token_id, csrf_token, gateway, expires_on}), or null when signed out. */
export async function currentSession() {
  try {
    const session = (await request("GET", "/session")).result;
    useCsrfToken(session.csrf_token);
    return session;
  } catch (error) {
    if (error.status === 401) return null;
    throw error;
  }
}

/** Signs in with {email, password} or {token}; rejects with the API's ApiFailure. */
export async function signIn(credentials) {
  const session = (await request("POST", "/session", credentials)).result;
  useCsrfToken(session.csrf_token);
  return session;
}

/** Ends the session. */
export async function signOut() {
  await request("DELETE", "/session");
  useCsrfToken(null);
}
