// The repositories page: each repository the token can read with its retention, size, event
// count and ingest tokens; creating and deleting repositories and ingest tokens (the management
// API). On a server without that API it lists the repositories' names and says so.
import { ApiError, RepositoryInfo, WhoAmI, repoPath, repositories, sendJson } from "./api";
import { clear, formatBytes, formatTime, h } from "./dom";

function retentionText(r: Record<string, unknown> | null | undefined): string {
  if (!r) return "none";
  return Object.entries(r).filter(([, v]) => v !== null && v !== undefined && v !== 0)
    .map(([k, v]) => `${k}=${v}`).join(", ") || "none";
}

export function repositoriesPage(root: HTMLElement, me: WhoAmI): () => void {
  const errorBox = h("div", { class: "error", testid: "repos-error" });
  const notice = h("div", { class: "notice" });
  const secretBox = h("div", { class: "secret hidden", testid: "new-token-box" });
  const listBox = h("div", {});
  const nameInput = h("input", { testid: "create-repo-name", placeholder: "new repository name" });
  const createForm = h("form", { class: "inline", testid: "create-repo-form" },
    nameInput, h("button", { type: "submit", testid: "create-repo-submit" }, "Create repository"));
  root.append(h("h2", {}, "Repositories"), notice, errorBox, secretBox, createForm, listBox);

  const fail = (e: unknown) => {
    errorBox.textContent = e instanceof ApiError ? `${e.status}: ${e.message}` : String(e);
  };

  createForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    errorBox.textContent = "";
    try {
      await sendJson("POST", "/api/v1/repositories", { name: nameInput.value.trim() });
      nameInput.value = "";
      await load();
    } catch (e) { fail(e); }
  });

  // A button that asks again before it acts (no browser dialog).
  function confirmButton(label: string, testid: string, action: () => Promise<void>): HTMLButtonElement {
    const b = h("button", { testid, class: "danger" }, label);
    let armed = false;
    b.addEventListener("click", async () => {
      if (!armed) {
        armed = true;
        b.textContent = `Really ${label.toLowerCase()}?`;
        setTimeout(() => { armed = false; b.textContent = label; }, 4000);
        return;
      }
      errorBox.textContent = "";
      try { await action(); await load(); } catch (e) { fail(e); }
    });
    return b;
  }

  function tokenForm(repo: string): HTMLFormElement {
    const name = h("input", { placeholder: "token name", testid: "ingest-token-name", size: 12 });
    const parser = h("input", { placeholder: "parser (optional)", testid: "ingest-token-parser", size: 12 });
    const f = h("form", { class: "inline" }, name, parser, h("button", { type: "submit", testid: "ingest-token-create" }, "Add ingest token"));
    f.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      errorBox.textContent = "";
      try {
        const body: Record<string, string> = { name: name.value.trim() };
        if (parser.value.trim()) body.parser = parser.value.trim();
        const t = await sendJson("POST", `${repoPath(repo)}/ingest-tokens`, body);
        clear(secretBox);
        secretBox.classList.remove("hidden");
        secretBox.append(`Ingest token "${t.name}" for ${repo} (shown once): `,
          h("code", { testid: "new-token-secret" }, t.token));
        await load();
      } catch (e) { fail(e); }
    });
    return f;
  }

  function render(repos: RepositoryInfo[], managed: boolean): void {
    clear(listBox);
    createForm.classList.toggle("hidden", !managed);
    notice.textContent = managed ? "" :
      "This server has no management API (/api/v1/repositories): repositories and tokens are set by its start-up flags. Names only.";
    notice.setAttribute("data-testid", managed ? "repos-managed" : "repos-degraded");
    const canManage = (repo: string) => me.admin || (me.repositories[repo] ?? []).includes("manage");
    const rows = repos.slice().sort((a, b) => a.name.localeCompare(b.name)).map((r) =>
      h("tr", { testid: "repo-row", "data-repo": r.name },
        h("td", {}, h("a", { href: `/search?repo=${encodeURIComponent(r.name)}&query=&start=1h` }, r.name)),
        h("td", { testid: "repo-events" }, r.events ?? ""), h("td", {}, formatBytes(r.bytes)),
        h("td", {}, formatBytes(r.rawBytes)), h("td", {}, managed ? retentionText(r.retention) : ""),
        h("td", {}, r.createdAt ? formatTime(r.createdAt) : ""),
        h("td", {},
          h("ul", { class: "tokens" }, ...(r.ingestTokens ?? []).map((t) =>
            h("li", { testid: "ingest-token", "data-name": t.name }, t.name, t.parser ? ` (parser ${t.parser})` : "",
              managed && canManage(r.name) ? confirmButton("Revoke", "ingest-token-revoke", async () => {
                await sendJson("DELETE", `${repoPath(r.name)}/ingest-tokens/${encodeURIComponent(t.name)}`);
              }) : null))),
          managed && canManage(r.name) ? tokenForm(r.name) : null),
        h("td", {}, managed && canManage(r.name) ? confirmButton("Delete", "repo-delete", async () => {
          await sendJson("DELETE", repoPath(r.name));
        }) : null)));
    listBox.append(h("table", { class: "grid", testid: "repos-table" },
      h("thead", {}, h("tr", {}, ...["repository", "events", "size", "raw size", "retention", "created", "ingest tokens", ""].map((c) => h("th", {}, c)))),
      h("tbody", {}, ...rows)));
  }

  async function load(): Promise<void> {
    try {
      const { repos, managed } = await repositories();
      render(repos, managed);
    } catch (e) { fail(e); }
  }
  load();
  return () => {};
}
