// The HTTP API as the UI uses it: every call carries the signed-in API token (kept in
// sessionStorage only: it ends with the browser tab's session).

const TOKEN_KEY = "sediment.token";

export class ApiError extends Error {
  constructor(public status: number, message: string) {
    super(message);
  }
}

export function getToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}
export function setToken(token: string | null): void {
  if (token === null) sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, token);
}

export function authHeaders(extra: Record<string, string> = {}): Record<string, string> {
  const t = getToken();
  return t ? { Authorization: `Bearer ${t}`, ...extra } : extra;
}

// The error text of a failed answer: the JSON error's message when there is one.
async function errorText(r: Response): Promise<string> {
  const text = await r.text();
  try {
    const j = JSON.parse(text);
    if (typeof j.error === "string") return j.error;
    if (j.error && typeof j.error.reason === "string") return j.error.reason;
    if (typeof j.message === "string") return j.message;
  } catch {
    /* not JSON */
  }
  const plain = text.trim();
  return plain && !plain.startsWith("<") ? plain : `${r.status} ${r.statusText}`;
}

export async function request(method: string, path: string, body?: unknown,
                              signal?: AbortSignal): Promise<Response> {
  const headers = authHeaders(body === undefined ? {} : { "Content-Type": "application/json" });
  const r = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  });
  if (!r.ok) throw new ApiError(r.status, await errorText(r));
  return r;
}

export async function getJson<T = any>(path: string, signal?: AbortSignal): Promise<T> {
  return (await request("GET", path, undefined, signal)).json();
}
export async function sendJson<T = any>(method: string, path: string, body?: unknown): Promise<T | null> {
  const r = await request(method, path, body);
  const text = await r.text();
  return text ? JSON.parse(text) : null;
}

// Who the token belongs to. `managed` is false on a server without the management API
// (/api/v1/whoami answers 404): then the token is valid when /api/v1/status answers, and it may
// do everything a start-up --api-token may.
export interface WhoAmI {
  name: string;
  admin: boolean;
  repositories: Record<string, string[]>;
  managed: boolean;
}

export async function whoami(): Promise<WhoAmI> {
  try {
    const w = await getJson("/api/v1/whoami");
    return { name: w.name ?? "", admin: !!w.admin, repositories: w.repositories ?? {}, managed: true };
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 404) throw e;
  }
  await getJson("/api/v1/status");  // throws ApiError(401) for a bad token
  return { name: "", admin: true, repositories: {}, managed: false };
}

export interface RepositoryInfo {
  name: string;
  events?: number;
  bytes?: number;
  rawBytes?: number;
  retention?: Record<string, unknown> | null;
  createdAt?: number | null;
  ingestTokens?: { name: string; parser?: string }[];
}

// The repositories the token can read: the management API's list, or (without it) the names in
// /api/v1/status. `managed` says which.
export async function repositories(): Promise<{ repos: RepositoryInfo[]; managed: boolean }> {
  try {
    const j = await getJson("/api/v1/repositories");
    return { repos: j.repositories ?? [], managed: true };
  } catch (e) {
    if (!(e instanceof ApiError) || (e.status !== 404 && e.status !== 405)) throw e;
  }
  const st = await getJson("/api/v1/status");
  return { repos: (st.repositories ?? []).map((name: string) => ({ name })), managed: false };
}

export function repoPath(repo: string): string {
  return `/api/v1/repositories/${encodeURIComponent(repo)}`;
}
