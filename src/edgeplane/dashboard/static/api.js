// The one way the dashboard talks to edgeplane: the v4 API (and /session), read as v4 envelopes.
// The session cookie goes along by itself; every request that may change something also carries the session's
// CSRF token, which the API requires with the cookie.

let csrfToken = null;

/** Remembers the CSRF token of the session just opened or read (null after sign out). */
export function useCsrfToken(token) {
  csrfToken = token;
}

/** What the API refused: its HTTP status and the envelope's errors ({code, message, source?}). */
export class ApiFailure extends Error {
  constructor(status, errors) {
    super(errors.map((error) => error.message).join("; ") || `HTTP ${status}`);
    this.status = status;
    this.errors = errors;
  }
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** Sends a request to an edgeplane path; resolves to the whole envelope, rejects with ApiFailure. */
export async function request(method, path, body) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (!SAFE_METHODS.has(method) && csrfToken) headers["X-CSRF-Token"] = csrfToken;
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
    });
  } catch (error) {
    throw new ApiFailure(0, [{ code: 0, message: `edgeplane did not answer: ${error.message}` }]);
  }
  let envelope;
  try {
    envelope = await response.json();
  } catch {
    throw new ApiFailure(response.status, [{ code: 0, message: `HTTP ${response.status} without a v4 envelope` }]);
  }
  if (!response.ok || !envelope.success) {
    throw new ApiFailure(response.status, envelope.errors || []);
  }
  return envelope;
}

/** A v4 call: the envelope's result. */
export async function v4(method, path, body) {
  return (await request(method, `/client/v4${path}`, body)).result;
}

/** Every page of a paginated v4 list. */
export async function v4All(path, perPage = 50) {
  const items = [];
  const separator = path.includes("?") ? "&" : "?";
  for (let page = 1; ; page += 1) {
    const envelope = await request("GET", `/client/v4${path}${separator}page=${page}&per_page=${perPage}`);
    items.push(...envelope.result);
    const info = envelope.result_info;
    if (!info || envelope.result.length === 0 || page >= info.total_pages) return items;
  }
}
