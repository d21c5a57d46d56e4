// The cluster page: GET /api/v1/cluster every few seconds as tables (nodes, partitions,
// replication, bucket) and the warnings it carries.
import { WhoAmI, getJson } from "./api";
import { clear, formatBytes, formatTime, h } from "./dom";

const REFRESH_MS = 2000;

function table(testid: string, head: string[], body: HTMLTableRowElement[]): HTMLTableElement {
  return h("table", { class: "grid", testid },
    h("thead", {}, h("tr", {}, ...head.map((c) => h("th", {}, c)))), h("tbody", {}, ...body));
}

export function clusterPage(root: HTMLElement, _me: WhoAmI): () => void {
  const updated = h("div", { class: "status", testid: "cluster-updated" });
  const errorBox = h("div", { class: "error", testid: "cluster-error" });
  const body = h("div", { testid: "cluster-body" });
  root.append(h("h2", {}, "Cluster"), updated, errorBox, body);
  let timer: number | undefined;
  let stopped = false;

  function render(c: any): void {
    clear(body);
    const warnings: string[] = c.warnings ?? [];
    body.append(h("div", { class: "summary" },
      h("span", { testid: "cluster-health", class: c.health === "ok" ? "ok" : "bad" }, `health: ${c.health}`),
      ` cluster ${c.clusterId ?? ""}, answered by node ${c.self}, Global applied ${c.globalApplied}`));
    body.append(h("h3", {}, "Warnings"),
      warnings.length === 0 ? h("p", { testid: "cluster-warnings" }, "none")
        : h("ul", { class: "warnings", testid: "cluster-warnings" }, ...warnings.map((w) => h("li", { testid: "cluster-warning" }, w))));
    body.append(h("h3", {}, "Nodes"), table("nodes-table",
      ["node", "state", "address", "version", "last heartbeat", "partitions", "segments", "segment bytes", "repair pending"],
      (c.nodes ?? []).map((n: any) => h("tr", { testid: "node-row", "data-node-id": n.id, "data-alive": n.alive ? "true" : "false" },
        h("td", {}, String(n.id), n.self ? " (this node)" : ""),
        h("td", { class: n.alive ? "ok" : "bad", testid: "node-state" }, n.alive ? "alive" : "dead"),
        h("td", {}, n.address), h("td", {}, n.version ?? ""),
        h("td", {}, n.lastHeartbeatMsAgo >= 0 ? `${(n.lastHeartbeatMsAgo / 1000).toFixed(1)} s ago` : ""),
        h("td", {}, n.partitionsOwned), h("td", {}, n.segments), h("td", {}, formatBytes(n.segmentBytes)),
        h("td", {}, n.repair ? `${n.repair.pendingSegments} (${formatBytes(n.repair.pendingBytes)})` : "")))));
    body.append(h("h3", {}, "Partitions"), table("partitions-table",
      ["partition", "owner", "owner alive", "epoch", "next offset", "log end", "lag", "buffered", "lost offsets"],
      (c.partitions ?? []).map((p: any) => h("tr", { testid: "partition-row", "data-partition": p.partition },
        h("td", {}, p.partition), h("td", {}, p.owner || "none"),
        h("td", { class: p.ownerAlive ? "ok" : "bad" }, p.ownerAlive ? "yes" : "no"),
        h("td", {}, p.epoch), h("td", {}, p.nextOffset >= 0 ? p.nextOffset : ""), h("td", {}, p.logEnd),
        h("td", { testid: "partition-lag" }, p.lag >= 0 ? p.lag : "?"), h("td", {}, p.bufferedEvents),
        h("td", { class: p.lostOffsets > 0 ? "bad" : "" }, p.lostOffsets)))));
    const r = c.replication ?? {};
    body.append(h("h3", {}, "Segment replication"), table("replication-table",
      ["factor", "segments", "bytes", "under-replicated", "without a live copy", "lost", "staged merges"],
      [h("tr", {}, h("td", {}, r.factor), h("td", {}, r.segments), h("td", {}, formatBytes(c.segments?.bytes)),
        h("td", { class: r.underReplicated > 0 ? "bad" : "" }, r.underReplicated),
        h("td", { class: r.withoutLiveCopy > 0 ? "bad" : "" }, r.withoutLiveCopy),
        h("td", { class: r.lost > 0 ? "bad" : "" }, r.lost), h("td", {}, r.stagedMerges))]));
    const b = c.bucket ?? {};
    body.append(h("h3", {}, "Bucket"), !b.enabled ? h("p", { testid: "bucket-table" }, "no bucket configured")
      : table("bucket-table", ["location", "generation", "uploaded segments", "backlog segments", "backlog bytes", "last snapshot"],
        [h("tr", {}, h("td", {}, b.location), h("td", {}, b.generation), h("td", {}, b.uploadedSegments ?? ""),
          h("td", { class: b.backlogSegments > 0 ? "warn" : "" }, b.backlogSegments ?? ""),
          h("td", {}, formatBytes(b.backlogBytes)), h("td", {}, b.lastSnapshot ? formatTime(b.lastSnapshot.atMs) : ""))]));
  }

  async function refresh(): Promise<void> {
    try {
      const c = await getJson("/api/v1/cluster");
      if (stopped) return;
      errorBox.textContent = "";
      render(c);
      updated.textContent = `updated ${new Date().toLocaleTimeString()} (every ${REFRESH_MS / 1000} s)`;
    } catch (e) {
      errorBox.textContent = `cannot read /api/v1/cluster: ${(e as Error).message}`;
    }
    if (!stopped) timer = window.setTimeout(refresh, REFRESH_MS);
  }
  refresh();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
