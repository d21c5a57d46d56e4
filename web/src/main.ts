// The single-page app: sign-in, the navigation bar and the three pages (/search, /cluster,
// /repositories). The server answers index.html on each of these paths.
import "./style.css";
import "uplot/dist/uPlot.min.css";
import { ApiError, WhoAmI, getToken, setToken, whoami } from "./api";
import { clear, h } from "./dom";
import { clusterPage } from "./cluster";
import { repositoriesPage } from "./repositories";
import { searchPage } from "./search";

// A page renders into `root`; the function it returns stops its timers and requests.
export type Page = (root: HTMLElement, me: WhoAmI) => () => void;

const pages: Record<string, { title: string; page: Page }> = {
  "/search": { title: "Search", page: searchPage },
  "/cluster": { title: "Cluster", page: clusterPage },
  "/repositories": { title: "Repositories", page: repositoriesPage },
};

let me: WhoAmI | null = null;
let stopPage: (() => void) | null = null;

function currentPath(): string {
  const p = location.pathname.replace(/\/+$/, "");
  return pages[p] ? p : "/search";
}

export function navigate(path: string): void {
  history.pushState(null, "", path);
  render();
}

function signIn(app: HTMLElement, message = ""): void {
  const input = h("input", { type: "password", testid: "signin-token", placeholder: "API token",
                             autocomplete: "off", size: 48 });
  const error = h("div", { class: "error", testid: "signin-error" }, message);
  const form = h("form", { class: "signin", testid: "signin-form" },
    h("h1", {}, "sediment"),
    h("p", {}, "Sign in with an API token. It is kept in this browser tab's session only."),
    input, h("button", { type: "submit", testid: "signin-submit" }, "Sign in"), error);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    setToken(input.value.trim());
    try {
      me = await whoami();
      render();
    } catch (e) {
      setToken(null);
      error.textContent = e instanceof ApiError && e.status === 401
        ? "This token is not valid (401)." : `Sign-in failed: ${(e as Error).message}`;
    }
  });
  clear(app);
  app.appendChild(form);
  input.focus();
}

async function render(): Promise<void> {
  const app = document.getElementById("app")!;
  if (stopPage) {
    stopPage();
    stopPage = null;
  }
  if (!getToken()) return signIn(app);
  if (!me) {
    try {
      me = await whoami();
    } catch (e) {
      setToken(null);
      return signIn(app, e instanceof ApiError && e.status === 401 ? "Your token is no longer valid." : "");
    }
  }
  const path = currentPath();
  const nav = h("nav", { class: "topbar" }, h("span", { class: "brand" }, "sediment"),
    ...Object.entries(pages).map(([p, { title }]) =>
      h("a", { href: p, class: p === path ? "active" : "", testid: `nav-${title.toLowerCase()}`,
               onclick: (ev: Event) => { ev.preventDefault(); navigate(p); } }, title)),
    h("span", { class: "spacer" }),
    h("span", { class: "who", testid: "whoami" },
      me.managed ? `${me.name || "token"}${me.admin ? " (admin)" : ""}` : "API token"),
    h("button", { testid: "signout", onclick: () => { setToken(null); me = null; render(); } }, "Sign out"));
  const main = h("main", { testid: `page-${path.slice(1)}` });
  clear(app);
  app.append(nav, main);
  document.title = `${pages[path].title} - sediment`;
  stopPage = pages[path].page(main, me);
}

window.addEventListener("popstate", () => render());
render();
