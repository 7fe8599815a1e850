// The sessiontree session viewer: one self-contained page written by
// `sessiontree export --html`. Everything from the session is read from JSON data blocks
// and put into the page with textContent / DOM nodes only (never innerHTML), so nothing
// in a session can run as script; the page's Content-Security-Policy admits this script
// alone (by hash) and no network access at all.
(function () {
  "use strict";

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  const $ = (id) => document.getElementById(id);

  // ---------------------------------------------------------------- data
  const idx = JSON.parse($("st-index").textContent);
  const ids = idx.ids, parents = idx.parents, kinds = idx.kinds, KN = idx.kind_names;
  const labels = idx.labels, CHUNK = idx.chunk;
  const N = ids.length;
  const posOf = new Map();
  for (let i = 0; i < N; i++) if (!posOf.has(ids[i])) posOf.set(ids[i], i);

  // Children in compressed rows (slot N is the virtual root holding the roots).
  const childCount = new Int32Array(N + 1);
  for (let i = 0; i < N; i++) childCount[parents[i] < 0 ? N : parents[i]]++;
  const childStart = new Int32Array(N + 2);
  for (let i = 0; i <= N; i++) childStart[i + 1] = childStart[i] + childCount[i];
  const childList = new Int32Array(N);
  const fillAt = childStart.slice(0, N + 1);
  for (let i = 0; i < N; i++) {
    const p = parents[i] < 0 ? N : parents[i];
    childList[fillAt[p]++] = i;
  }
  const kids = (p) => { const k = p < 0 ? N : p; return childList.subarray(childStart[k], childStart[k + 1]); };
  const kindName = (pos) => KN[kinds[pos]];

  // Entry data lives in chunks of CHUNK entries: JSON, or deflated and base64-encoded for
  // large sessions (a third of the bytes for the browser to read). A chunk is decoded when
  // first needed (loadChunk, asynchronous) and kept in a bounded cache; entry() then
  // reads it synchronously.
  const chunkCache = new Map(), chunkLoads = new Map();
  const NCHUNKS = Math.ceil(N / CHUNK);
  const chunkOf = (pos) => Math.floor(pos / CHUNK);
  function b64bytes(text) {
    if (Uint8Array.fromBase64) return Uint8Array.fromBase64(text);
    const bin = atob(text), out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  function loadChunk(c) {
    if (chunkCache.has(c)) return Promise.resolve();
    let p = chunkLoads.get(c);
    if (p) return p;
    const node = $("st-c" + c);
    p = (async () => {
      let text = node.textContent;
      if (node.dataset.enc === "deflate") {
        const stream = new Blob([b64bytes(text.trim())]).stream().pipeThrough(new DecompressionStream("deflate"));
        text = await new Response(stream).text();
      }
      chunkCache.set(c, JSON.parse(text));
      chunkLoads.delete(c);
      if (chunkCache.size > 160) {
        for (const k of chunkCache.keys()) { if (k !== c) { chunkCache.delete(k); break; } }
      }
    })();
    chunkLoads.set(c, p);
    return p;
  }
  function loaded(pos) { return chunkCache.has(chunkOf(pos)); }
  function ensure(positions) {
    const want = new Set();
    for (const p of positions) if (p >= 0 && p < N) want.add(chunkOf(p));
    return Promise.all([...want].map(loadChunk));
  }
  function entry(pos) {
    const arr = chunkCache.get(chunkOf(pos));
    if (!arr) throw new Error("chunk of entry " + pos + " not loaded");
    return arr[pos - chunkOf(pos) * CHUNK];
  }

  // One-line previews, made from the entries when a row first shows them.
  const previewCache = new Map();
  function preview(pos) {
    let p = previewCache.get(pos);
    if (p === undefined) {
      p = makePreview(entry(pos));
      previewCache.set(pos, p);
    }
    return p;
  }
  function oneLine(s, n) {
    s = String(s === undefined || s === null ? "" : s).slice(0, n + 64).replace(/\s+/g, " ").trim();
    return s.length > n ? s.slice(0, n - 1) + "…" : s;
  }
  function msgText(m) {
    if (!m) return "";
    if (m.role === "user" || m.role === "custom") {
      const img = Array.isArray(m.content) && m.content.some((b) => b && b.type === "image");
      return (m.role === "custom" ? m.custom_type + ": " : "") + textOf(m.content) + (img ? " [image]" : "");
    }
    if (m.role === "assistant") {
      const parts = [];
      for (const b of m.content || []) {
        if (!b) continue;
        if (b.type === "text") parts.push(b.text);
        else if (b.type === "tool_call") parts.push("→ " + b.name + "(" + JSON.stringify(b.arguments).slice(0, 120) + ")");
      }
      if (!parts.length && m.error_message) parts.push("error: " + m.error_message);
      return parts.join(" ");
    }
    if (m.role === "tool_result") return (m.is_error ? "✗ " : "") + m.tool_name + ": " + textOf(m.content);
    if (m.role === "compaction_summary" || m.role === "branch_summary") return m.summary;
    return "(role " + m.role + ")";
  }
  function makePreview(e) {
    switch (e.type) {
      case "message": return oneLine(msgText(e.message), 160);
      case "model_change": return e.provider + "/" + e.model_id;
      case "thinking_level_change": return String(e.thinking_level);
      case "active_tools_change": return (e.active_tool_names || []).join(", ");
      case "compaction": return oneLine((Number(e.tokens_before) || 0).toLocaleString() + " tokens summarised: " + e.summary, 160);
      case "branch_summary": return oneLine(e.summary, 160);
      case "custom": return String(e.custom_type);
      case "custom_message": return oneLine(e.custom_type + ": " + textOf(e.content), 160);
      case "label": return e.label === null || e.label === undefined ? "cleared → " + e.target_id : "'" + e.label + "' → " + e.target_id;
      case "session_info": return e.name === null || e.name === undefined ? "(cleared)" : String(e.name);
      case "leaf": return "→ " + (e.target_id === null || e.target_id === undefined ? "(before the first entry)" : e.target_id);
      default: return "(" + e.type + ")";
    }
  }

  // ---------------------------------------------------------------- branch state
  const sessionLeaf = idx.leaf;
  const onPath = new Uint8Array(N);
  let leafPos = -1, path = [], pathIndex = new Map(), selected = -1;

  function setBranch(leaf) {
    onPath.fill(0);
    path = [];
    for (let x = leaf; x >= 0; x = parents[x]) { onPath[x] = 1; path.push(x); }
    path.reverse();
    pathIndex = new Map();
    path.forEach((p, i) => pathIndex.set(p, i));
    leafPos = leaf;
  }
  function branchEndThrough(pos) {
    if (onPath[pos]) return leafPos;
    let x = pos;
    for (;;) {
      const k = kids(x);
      if (!k.length) return x;
      // The session's leaf if it is below; else the newest child.
      let next = k[k.length - 1];
      if (sessionLeaf >= 0) for (const c of k) if (isAncestor(c, sessionLeaf)) next = c;
      x = next;
    }
  }
  function isAncestor(a, b) {
    for (let x = b; x >= 0; x = parents[x]) if (x === a) return true;
    return false;
  }

  // ---------------------------------------------------------------- the tree pane
  const ROW = 22;
  const collapsed = new Uint8Array(N);
  let rowPos = new Int32Array(0), rowDepth = new Int32Array(0), rowOf = new Map();
  const treeBox = $("tree"), spacer = el("div", "spacer");
  treeBox.appendChild(spacer);

  // At a branch point one child continues in the same column (the one towards the
  // session's leaf, else the newest); the others are side branches, one level in.
  const onLeafPath = new Uint8Array(N);
  for (let x = sessionLeaf; x >= 0; x = parents[x]) onLeafPath[x] = 1;
  function mainOf(k) {
    for (const c of k) if (onLeafPath[c]) return c;
    return k[k.length - 1];
  }
  function buildRows() {
    const pos = [], depth = [];
    const stack = [];
    const pushKids = (k, d, x) => {
      if (!k.length) return;
      const main = mainOf(k);
      stack.push(main, d);
      if (x >= 0 && collapsed[x]) return;
      for (let i = k.length - 1; i >= 0; i--) if (k[i] !== main) stack.push(k[i], d + 1);
    };
    pushKids(kids(-1), 0, -1);
    while (stack.length) {
      const d = stack.pop(), x = stack.pop();
      pos.push(x); depth.push(d);
      pushKids(kids(x), d, x);
    }
    rowPos = Int32Array.from(pos);
    rowDepth = Int32Array.from(depth);
    rowOf = new Map();
    for (let i = 0; i < rowPos.length; i++) rowOf.set(rowPos[i], i);
    spacer.style.height = rowPos.length * ROW + "px";
  }

  let treeWaiting = false;
  function renderTree() {
    const top = treeBox.scrollTop, h = treeBox.clientHeight || 600;
    const first = Math.max(0, Math.floor(top / ROW) - 20);
    const last = Math.min(rowPos.length, Math.ceil((top + h) / ROW) + 20);
    const frag = document.createDocumentFragment();
    let missing = false;
    for (let r = first; r < last; r++) {
      if (!loaded(rowPos[r])) missing = true;
      frag.appendChild(treeRow(r));
    }
    spacer.replaceChildren(frag);
    if (missing && !treeWaiting) {
      // Draw again once the previews' chunks are decoded.
      treeWaiting = true;
      ensure(rowPos.subarray(first, last)).then(() => { treeWaiting = false; renderTree(); });
    }
  }

  function treeRow(r) {
    const x = rowPos[r];
    const row = el("div", "row");
    row.style.top = r * ROW + "px";
    row.dataset.pos = String(x);
    row.dataset.id = ids[x];
    if (onPath[x]) row.classList.add("on");
    if (x === selected) row.classList.add("sel");
    for (let d = 0; d < rowDepth[r]; d++) {
      const g = el("span", "guide");
      g.style.width = "14px";
      row.appendChild(g);
    }
    const k = kids(x);
    const tog = el("span", "tog");
    if (k.length > 1) {
      tog.textContent = (collapsed[x] ? "▸ " : "▾ ") + k.length;
      tog.title = collapsed[x] ? "expand these branches" : "collapse these branches";
      tog.dataset.toggle = String(x);
    } else {
      tog.classList.add("none");
      tog.textContent = "·";
    }
    row.appendChild(tog);
    const kn = kindName(x);
    row.appendChild(el("span", "k k-" + kn, kn));
    const lab = labels[ids[x]];
    if (lab !== undefined) row.appendChild(el("span", "lab", lab));
    const pv = loaded(x) ? preview(x) : "…";
    row.appendChild(el("span", "pv", " " + pv));
    if (x === sessionLeaf) row.appendChild(el("span", "leafmark", "◀ leaf"));
    row.title = ids[x] + " · " + pv;
    return row;
  }

  treeBox.addEventListener("scroll", () => requestAnimationFrame(renderTree));
  treeBox.addEventListener("click", (ev) => {
    const t = ev.target;
    if (t.dataset && t.dataset.toggle !== undefined) {
      const x = Number(t.dataset.toggle);
      collapsed[x] ^= 1;
      buildRows(); renderTree();
      return;
    }
    const row = t.closest ? t.closest(".row") : null;
    if (row) select(Number(row.dataset.pos), true);
  });

  function revealInTree(pos) {
    let changed = false;
    for (let x = parents[pos]; x >= 0; x = parents[x]) if (collapsed[x]) { collapsed[x] = 0; changed = true; }
    if (changed) buildRows();
    const r = rowOf.get(pos);
    if (r === undefined) return;
    const top = r * ROW, h = treeBox.clientHeight || 600;
    if (top < treeBox.scrollTop || top > treeBox.scrollTop + h - ROW) treeBox.scrollTop = Math.max(0, top - h / 3);
  }

  // ---------------------------------------------------------------- Markdown (to DOM)
  const SAFE_URL = /^(https?:|mailto:)/i;
  function inline(text, parent) {
    // code spans, **bold**, *em* / _em_, [text](url); everything else is text.
    const re = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*]+)\*\*|(?:^|(?<=\W))[*_]([^*_\s][^*_]*)[*_](?=\W|$)|\[([^\]]+)\]\(([^)\s]+)\)/g;
    let last = 0, m;
    while ((m = re.exec(text)) !== null) {
      if (m.index > last) parent.appendChild(document.createTextNode(text.slice(last, m.index)));
      if (m[1]) parent.appendChild(el("code", null, m[2]));
      else if (m[3] !== undefined) parent.appendChild(el("strong", null, m[3]));
      else if (m[4] !== undefined) parent.appendChild(el("em", null, m[4]));
      else if (m[5] !== undefined) {
        if (SAFE_URL.test(m[6])) {
          const a = el("a", null, m[5]);
          a.href = m[6]; a.rel = "noopener noreferrer"; a.target = "_blank";
          parent.appendChild(a);
        } else parent.appendChild(document.createTextNode(m[0]));
      }
      last = re.lastIndex;
    }
    if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
  }

  function markdown(src, parent) {
    const lines = String(src).split("\n");
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      const fenceM = /^\s*(`{3,}|~{3,})\s*([\w+#.-]*)/.exec(line);
      if (fenceM) {
        const fence = fenceM[1], body = [];
        i++;
        while (i < lines.length && !lines[i].trim().startsWith(fence)) body.push(lines[i++]);
        i++;
        const pre = el("pre"), code = el("code", fenceM[2] ? "lang-" + fenceM[2] : null, body.join("\n"));
        pre.appendChild(code); parent.appendChild(pre);
        continue;
      }
      const h = /^(#{1,6})\s+(.*)$/.exec(line);
      if (h) { const e = el("h" + Math.min(6, h[1].length + 2)); inline(h[2], e); parent.appendChild(e); i++; continue; }
      if (/^\s*>/.test(line)) {
        const q = [];
        while (i < lines.length && /^\s*>/.test(lines[i])) q.push(lines[i++].replace(/^\s*> ?/, ""));
        const bq = el("blockquote"); markdown(q.join("\n"), bq); parent.appendChild(bq);
        continue;
      }
      const li = /^\s*([-*+]|\d+[.)])\s+/.exec(line);
      if (li) {
        const list = el(/\d/.test(li[1]) ? "ol" : "ul");
        while (i < lines.length && /^\s*([-*+]|\d+[.)])\s+/.test(lines[i])) {
          const item = el("li"); inline(lines[i].replace(/^\s*([-*+]|\d+[.)])\s+/, ""), item);
          list.appendChild(item); i++;
        }
        parent.appendChild(list);
        continue;
      }
      if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) { parent.appendChild(el("hr")); i++; continue; }
      if (!line.trim()) { i++; continue; }
      const para = [];
      while (i < lines.length && lines[i].trim() && !/^\s*(`{3,}|~{3,}|#{1,6}\s|>|([-*+]|\d+[.)])\s)/.test(lines[i])) para.push(lines[i++]);
      if (!para.length) para.push(lines[i++]);
      const p = el("p"); inline(para.join("\n"), p); parent.appendChild(p);
    }
  }

  // ---------------------------------------------------------------- entries (to DOM)
  const IMAGE_MIME = /^image\/(png|jpe?g|gif|webp|bmp|avif)$/i;
  const BASE64 = /^[A-Za-z0-9+/=\s]*$/;
  function image(block, parent) {
    const mime = String(block.mime_type || "");
    const data = String(block.data || "");
    if (IMAGE_MIME.test(mime) && BASE64.test(data)) {
      const img = el("img");
      img.alt = "image (" + mime + ")";
      img.src = "data:" + mime + ";base64," + data.replace(/\s+/g, "");
      parent.appendChild(img);
    } else parent.appendChild(el("div", "note", "[image " + mime + " not shown]"));
  }
  function content(c, parent) {
    if (typeof c === "string") { markdown(c, parent); return; }
    if (!Array.isArray(c)) return;
    for (const b of c) {
      if (!b || typeof b !== "object") continue;
      if (b.type === "text") markdown(b.text, parent);
      else if (b.type === "image") image(b, parent);
      else if (b.type === "thinking") thinking(b, parent);
    }
  }
  function thinking(b, parent) {
    const d = el("details", "thinking");
    const text = String(b.thinking || "");
    d.appendChild(el("summary", null, b.redacted ? "thinking (redacted)" : "thinking · " + text.length.toLocaleString() + " characters"));
    if (!b.redacted) d.appendChild(el("pre", null, text));
    parent.appendChild(d);
  }
  function textOf(c) {
    if (typeof c === "string") return c;
    if (!Array.isArray(c)) return "";
    return c.filter((b) => b && b.type === "text").map((b) => String(b.text)).join("\n");
  }
  function jsonText(v) { try { return JSON.stringify(v, null, 2); } catch (e) { return String(v); } }

  function findResult(i, callId) {
    for (let j = i + 1; j < Math.min(path.length, i + 120); j++) {
      const p = path[j];
      if (kindName(p) !== "tool_result") continue;
      const m = entry(p).message;
      if (m && m.tool_call_id === callId) return m;
    }
    return null;
  }
  function pairedAbove(i, callId) {
    for (let j = i - 1; j >= Math.max(0, i - 120); j--) {
      const p = path[j];
      if (kindName(p) !== "assistant") continue;
      const m = entry(p).message;
      if (m && Array.isArray(m.content) && m.content.some((b) => b && b.type === "tool_call" && b.id === callId)) return true;
    }
    return false;
  }
  function toolCall(b, result, parent) {
    const d = el("details", "tool" + (result && result.is_error ? " err" : ""));
    const args = jsonText(b.arguments);
    const mark = result ? (result.is_error ? " ✗" : " ✓") : " (no result)";
    d.appendChild(el("summary", null, "🔧 " + b.name + "(" + args.replace(/\s+/g, " ").slice(0, 160) + ")" + mark));
    d.appendChild(el("pre", null, args));
    if (result) {
      d.appendChild(el("div", "note", "result" + (result.is_error ? " (error)" : "")));
      const body = el("div", "body");
      toolOutput(result.content, body);
      d.appendChild(body);
    }
    parent.appendChild(d);
  }
  function toolOutput(c, parent) {
    if (typeof c === "string") { parent.appendChild(el("pre", null, c)); return; }
    for (const b of c || []) {
      if (b && b.type === "image") image(b, parent);
      else if (b && b.type === "text") parent.appendChild(el("pre", null, b.text));
    }
  }

  function message(m, i, body, head) {
    const role = String(m.role);
    if (role === "user") content(m.content, body);
    else if (role === "assistant") {
      head.appendChild(el("span", null, m.provider + "/" + m.model));
      const u = m.usage || {};
      if (u.total_tokens) head.appendChild(el("span", null, (u.input || 0).toLocaleString() + " in / " + (u.output || 0).toLocaleString() + " out"));
      if (m.stop_reason && m.stop_reason !== "stop") head.appendChild(el("span", m.stop_reason === "error" ? "err" : null, m.stop_reason));
      for (const b of m.content || []) {
        if (!b || typeof b !== "object") continue;
        if (b.type === "text") markdown(b.text, body);
        else if (b.type === "thinking") thinking(b, body);
        else if (b.type === "tool_call") toolCall(b, findResult(i, b.id), body);
      }
      if (m.error_message) body.appendChild(el("div", "err", "error: " + m.error_message));
    } else if (role === "tool_result") {
      head.appendChild(el("span", null, m.tool_name + " · " + m.tool_call_id));
      const d = el("details", "tool" + (m.is_error ? " err" : ""));
      d.appendChild(el("summary", null, "result of " + m.tool_name + (m.is_error ? " ✗" : "")));
      toolOutput(m.content, d);
      body.appendChild(d);
    } else if (role === "custom") {
      head.appendChild(el("span", null, m.custom_type));
      content(m.content, body);
    } else if (role === "compaction_summary" || role === "branch_summary") markdown(m.summary, body);
    else body.appendChild(el("pre", null, jsonText(m)));
  }

  const META = new Set(["model_change", "thinking_level_change", "active_tools_change", "session_info", "label", "leaf", "custom"]);
  function card(i) {
    const pos = path[i], e = entry(pos), kn = kindName(pos);
    if (kn === "tool_result" && e.message && pairedAbove(i, e.message.tool_call_id)) return null;
    const art = el("article", "entry ek-" + kn + (META.has(e.type) ? " meta" : ""));
    art.id = "e-" + e.id;
    art.dataset.pos = String(pos);
    if (pos === selected) art.classList.add("sel");
    const head = el("header");
    head.appendChild(el("span", "kind k-" + kn, kn.replace(/_/g, " ")));
    const a = el("a", "perma", e.id);
    a.href = "#e-" + encodeURIComponent(e.id);
    a.title = "permalink";
    head.appendChild(a);
    head.appendChild(el("time", null, e.timestamp));
    const lab = labels[e.id];
    if (lab !== undefined) head.appendChild(el("span", "lab", lab));
    if (pos === sessionLeaf) head.appendChild(el("span", "leafmark", "◀ leaf"));
    art.appendChild(head);
    const body = el("div", "body");
    if (e.type === "message" && e.message) message(e.message, i, body, head);
    else if (e.type === "compaction") {
      const kept = e.first_kept_entry_id;
      const note = el("div", "note", (Number(e.tokens_before) || 0).toLocaleString() + " tokens summarised" + (kept ? "; kept from " : ""));
      if (kept) { const k = el("a", null, kept); k.href = "#e-" + encodeURIComponent(kept); note.appendChild(k); }
      body.appendChild(note);
      markdown(e.summary, body);
    } else if (e.type === "branch_summary") {
      body.appendChild(el("div", "note", "summary of the branch left at " + e.from_id));
      markdown(e.summary, body);
    } else if (e.type === "custom_message") {
      head.appendChild(el("span", null, e.custom_type));
      content(e.content, body);
    } else if (META.has(e.type)) body.appendChild(el("span", null, preview(pos)));
    else body.appendChild(el("pre", null, jsonText(e)));
    art.appendChild(body);
    return art;
  }

  // ---------------------------------------------------------------- the conversation pane
  const conv = $("conv");
  let winStart = 0, winEnd = 0;
  const topSentinel = el("div", "sentinel"), bottomSentinel = el("div", "sentinel");
  const topMore = el("div", "more"), bottomMore = el("div", "more");

  function renderRange(from, to) {
    const frag = document.createDocumentFragment();
    for (let i = from; i < to; i++) { const c = card(i); if (c) frag.appendChild(c); }
    return frag;
  }
  function updateMore() {
    topMore.textContent = winStart > 0 ? "… " + winStart.toLocaleString() + " earlier entries on this branch" : "start of the branch";
    bottomMore.textContent = winEnd < path.length ? "… " + (path.length - winEnd).toLocaleString() + " more entries" : "end of the branch";
  }
  // Tool calls are paired with results up to PAIR entries away: load that much around.
  const PAIR = 120;
  function around(from, to) {
    const out = [];
    for (let i = Math.max(0, from - PAIR); i < Math.min(path.length, to + PAIR); i++) out.push(path[i]);
    return out;
  }
  let convToken = 0, extending = false;
  async function showConversation(center) {
    const token = ++convToken;
    const from = Math.max(0, center - 15), to = Math.min(path.length, center + 40);
    await ensure(around(from, to));
    if (token !== convToken) return false;
    winStart = from; winEnd = to;
    conv.replaceChildren(topSentinel, topMore, renderRange(winStart, winEnd), bottomMore, bottomSentinel);
    updateMore();
    return true;
  }
  async function extendDown() {
    if (winEnd >= path.length || extending) return;
    extending = true;
    const token = convToken, to = Math.min(path.length, winEnd + 50);
    try {
      await ensure(around(winEnd, to));
      if (token !== convToken) return;
      bottomMore.before(renderRange(winEnd, to));
      winEnd = to; updateMore();
    } finally { extending = false; }
  }
  async function extendUp() {
    if (winStart <= 0 || extending) return;
    extending = true;
    const token = convToken, from = Math.max(0, winStart - 50);
    try {
      await ensure(around(from, winStart));
      if (token !== convToken) return;
      const before = conv.scrollHeight;
      topMore.after(renderRange(from, winStart));
      conv.scrollTop += conv.scrollHeight - before;
      winStart = from; updateMore();
    } finally { extending = false; }
  }
  const io = new IntersectionObserver((items) => {
    for (const it of items) {
      if (!it.isIntersecting) continue;
      if (it.target === bottomSentinel) extendDown(); else extendUp();
    }
  }, { root: conv, rootMargin: "800px 0px" });
  io.observe(topSentinel); io.observe(bottomSentinel);

  // ---------------------------------------------------------------- selection
  async function select(pos, fromTree) {
    if (pos < 0 || pos >= N) return;
    if (!onPath[pos]) setBranch(branchEndThrough(pos));
    selected = pos;
    const i = pathIndex.get(pos);
    revealInTree(pos);
    renderTree();
    const hash = "#e-" + encodeURIComponent(ids[pos]);
    if (location.hash !== hash) history.replaceState(null, "", hash);
    $("branch").textContent = "branch: " + path.length.toLocaleString() + " entries, ends at " + (leafPos >= 0 ? ids[leafPos] : "—") + (leafPos === sessionLeaf ? " (the session's leaf)" : "");
    if (!(await showConversation(i === undefined ? path.length - 1 : i))) return;
    const target = document.getElementById("e-" + ids[pos]);
    if (target) target.scrollIntoView({ block: fromTree ? "center" : "start" });
  }
  function fromHash() {
    const h = location.hash;
    if (!h.startsWith("#e-")) return -1;
    let id;
    try { id = decodeURIComponent(h.slice(3)); } catch (e) { return -1; }
    const p = posOf.get(id);
    return p === undefined ? -1 : p;
  }
  window.addEventListener("hashchange", () => { const p = fromHash(); if (p >= 0 && p !== selected) select(p, false); });
  $("toleaf").addEventListener("click", () => select(sessionLeaf >= 0 ? sessionLeaf : N - 1, false));

  // ---------------------------------------------------------------- search
  const results = $("results"), q = $("q");
  let searchToken = 0, debounce = 0;
  function searchText(e) {
    const parts = [];
    if (e.type === "message" && e.message) {
      const m = e.message;
      if (typeof m.content === "string") parts.push(m.content);
      else if (Array.isArray(m.content)) for (const b of m.content) {
        if (!b) continue;
        if (b.type === "text") parts.push(b.text);
        else if (b.type === "thinking") parts.push(b.thinking);
        else if (b.type === "tool_call") parts.push(b.name, jsonText(b.arguments));
      }
      if (m.summary) parts.push(m.summary);
      if (m.tool_name) parts.push(m.tool_name);
      if (m.error_message) parts.push(m.error_message);
    } else {
      if (e.summary) parts.push(e.summary);
      if (e.content) parts.push(textOf(e.content));
      if (e.name) parts.push(e.name);
      if (e.label) parts.push(e.label);
      if (e.custom_type) parts.push(e.custom_type);
    }
    return parts.join("\n");
  }
  function snippet(text, needle) {
    const at = text.toLowerCase().indexOf(needle);
    const from = Math.max(0, at - 40);
    return (from > 0 ? "…" : "") + text.slice(from, at + needle.length + 80).replace(/\s+/g, " ");
  }
  function runSearch(query) {
    const token = ++searchToken;
    results.replaceChildren();
    const needle = query.trim().toLowerCase();
    if (!needle) return;
    delete results.dataset.done;
    const status = el("li", "status", "searching…");
    results.appendChild(status);
    let found = 0, c = 0;
    const LIMIT = 500;
    (async () => {
      for (; c < NCHUNKS && found < LIMIT; c++) {
        await loadChunk(c);
        if (token !== searchToken) return;
        const end = Math.min(N, (c + 1) * CHUNK);
        for (let pos = c * CHUNK; pos < end && found < LIMIT; pos++) {
          const text = searchText(entry(pos));
          if (text.toLowerCase().includes(needle)) {
            found++;
            const li = el("li", "hit");
            li.dataset.pos = String(pos);
            li.appendChild(el("span", "k k-" + kindName(pos), kindName(pos) + " "));
            li.appendChild(document.createTextNode(snippet(text, needle)));
            status.before(li);
          }
        }
        status.textContent = "searching… " + Math.floor((100 * (c + 1)) / NCHUNKS) + "%";
        if (c % 4 === 3) await new Promise((r) => setTimeout(r, 0));
      }
      if (token !== searchToken) return;
      status.textContent = found ? found.toLocaleString() + (found >= LIMIT ? "+" : "") + " matches" : "no match";
      results.dataset.done = "1";
    })();
  }
  q.addEventListener("input", () => {
    delete results.dataset.done;
    clearTimeout(debounce);
    debounce = setTimeout(() => runSearch(q.value), 200);
  });
  q.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter") { clearTimeout(debounce); runSearch(q.value); }
    if (ev.key === "Escape") { q.value = ""; runSearch(""); }
  });
  results.addEventListener("click", (ev) => {
    const li = ev.target.closest ? ev.target.closest("li.hit") : null;
    if (li) select(Number(li.dataset.pos), false);
  });
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "/" && document.activeElement !== q) { ev.preventDefault(); q.focus(); }
  });

  // ---------------------------------------------------------------- start
  $("title").textContent = idx.session.name || "session " + idx.session.id;
  $("meta").textContent = idx.session.id + " · " + N.toLocaleString() + " entries · cwd " + idx.session.cwd + " · created " + idx.session.timestamp;
  document.title = (idx.session.name || idx.session.id) + " · sessiontree";
  buildRows();
  (async () => {
    if (N) {
      setBranch(sessionLeaf >= 0 ? sessionLeaf : N - 1);
      const start = fromHash();
      await select(start >= 0 ? start : (sessionLeaf >= 0 ? sessionLeaf : N - 1), false);
    } else {
      conv.appendChild(el("div", "note", "This session has no entries."));
    }
    document.body.dataset.ready = "1";
  })();
})();
