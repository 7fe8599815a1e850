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

  // Short ids: the first 8 characters (pi's ids are 8 hex digits already), longer where
  // entries share them, so a short id is still unique in the session. The full id is in
  // the permalink, the tooltip and data-id.
  const shortLen = new Uint16Array(N);
  (function () {
    const groups = new Map();
    for (let i = 0; i < N; i++) {
      if (ids[i].length <= 8) continue;
      const k = ids[i].slice(0, 8), g = groups.get(k);
      if (g === undefined) groups.set(k, i);
      else if (typeof g === "number") groups.set(k, [g, i]);
      else g.push(i);
    }
    const common = (a, b) => { let n = 0; while (n < a.length && a[n] === b[n]) n++; return n; };
    for (const g of groups.values()) {
      if (typeof g === "number") continue;
      g.sort((a, b) => (ids[a] < ids[b] ? -1 : ids[a] > ids[b] ? 1 : 0));
      for (let j = 0; j < g.length; j++) {
        let n = 8;
        if (j > 0) n = Math.max(n, common(ids[g[j]], ids[g[j - 1]]) + 1);
        if (j + 1 < g.length) n = Math.max(n, common(ids[g[j]], ids[g[j + 1]]) + 1);
        shortLen[g[j]] = Math.min(n, ids[g[j]].length, 65535);
      }
    }
  })();
  const shortId = (pos) => ids[pos].slice(0, shortLen[pos] || 8);

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
    const have = chunkCache.get(c);
    if (have !== undefined) {
      // Least recently used goes first: a chunk in use moves to the end.
      chunkCache.delete(c);
      chunkCache.set(c, have);
      return Promise.resolve();
    }
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
    if (m.role === "bash_execution") return shellLine(m);
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
  let onCol = new Int32Array(0), onColDirty = true; // the tree's drawing of the branch

  function setBranch(leaf) {
    onPath.fill(0);
    path = [];
    for (let x = leaf; x >= 0; x = parents[x]) { onPath[x] = 1; path.push(x); }
    path.reverse();
    pathIndex = new Map();
    path.forEach((p, i) => pathIndex.set(p, i));
    leafPos = leaf;
    onColDirty = true;
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
  let rowPos = new Int32Array(0), rowDepth = new Int32Array(0), rowSide = new Uint8Array(0), rowOf = new Map();
  const treeBox = $("tree"), spacer = el("div", "spacer");
  treeBox.appendChild(spacer);

  // At a branch point one child continues in the same column (the one towards the
  // session's leaf, else the newest); the others are side branches, drawn before it one
  // level in. Connectors as in `sessiontree tree`: a side branch starts with a tee (├─)
  // on its branch point's column, and that column's line (│) runs on past the side
  // branches down to the child that continues it.
  const onLeafPath = new Uint8Array(N);
  for (let x = sessionLeaf; x >= 0; x = parents[x]) onLeafPath[x] = 1;
  function mainOf(k) {
    for (const c of k) if (onLeafPath[c]) return c;
    return k[k.length - 1];
  }
  function buildRows() {
    const pos = [], depth = [], side = [];
    const stack = [];
    const pushKids = (k, d, x) => {
      if (!k.length) return;
      const main = mainOf(k);
      stack.push(main, d, 0);
      if (x >= 0 && collapsed[x]) return;
      for (let i = k.length - 1; i >= 0; i--) if (k[i] !== main) stack.push(k[i], d + 1, 1);
    };
    pushKids(kids(-1), 0, -1);
    while (stack.length) {
      const s = stack.pop(), d = stack.pop(), x = stack.pop();
      pos.push(x); depth.push(d); side.push(s);
      pushKids(kids(x), d, x);
    }
    rowPos = Int32Array.from(pos);
    rowDepth = Int32Array.from(depth);
    rowSide = Uint8Array.from(side);
    rowOf = new Map();
    for (let i = 0; i < rowPos.length; i++) rowOf.set(rowPos[i], i);
    spacer.style.height = rowPos.length * ROW + "px";
    onColDirty = true;
  }
  // The selected branch drawn in the connectors: for each row, the column whose line the
  // branch runs down through it (-1: none), from one of its entries to the next.
  function computeOnCols() {
    onCol = new Int32Array(rowPos.length).fill(-1);
    for (let i = 0; i + 1 < path.length; i++) {
      const r1 = rowOf.get(path[i]), r2 = rowOf.get(path[i + 1]);
      if (r1 === undefined || r2 === undefined) break;
      for (let r = r1 + 1; r < r2; r++) onCol[r] = rowDepth[r1];
    }
    onColDirty = false;
  }

  let treeWaiting = false;
  function renderTree() {
    if (onColDirty) computeOnCols();
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
    const d = rowDepth[r];
    for (let j = 0; j < d; j++) {
      // A line (│) per column; a tee (├─) where a side branch starts.
      const g = el("span", j === d - 1 && rowSide[r] ? "g t" : "g");
      if (onCol[r] === j) g.classList.add("on");
      row.appendChild(g);
    }
    row.appendChild(el("span", "id", shortId(x)));
    const k = kids(x);
    const tog = el("span", "tog");
    if (k.length > 1) {
      tog.textContent = (collapsed[x] ? "▸" : "▾") + k.length;
      tog.title = k.length + " branches: " + (collapsed[x] ? "expand them" : "collapse them");
      tog.dataset.toggle = String(x);
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
  // The text that search looks in is shown inside elements of class "hl" (highlighted
  // there); searchFields() below lists the same texts, in the same order, from the data.
  function md(src, parent) {
    const box = el("div", "hl");
    markdown(src, box);
    parent.appendChild(box);
  }
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
    if (typeof c === "string") { md(c, parent); return; }
    if (!Array.isArray(c)) return;
    for (const b of c) {
      if (!b || typeof b !== "object") continue;
      if (b.type === "text") md(b.text, parent);
      else if (b.type === "image") image(b, parent);
      else if (b.type === "thinking") thinking(b, parent);
    }
  }
  function thinking(b, parent) {
    const d = el("details", "thinking");
    const text = String(b.thinking || "");
    d.appendChild(el("summary", null, b.redacted ? "thinking (redacted)" : "thinking · " + text.length.toLocaleString() + " characters"));
    if (!b.redacted) d.appendChild(el("pre", "hl", text));
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
      if (m && m.tool_call_id === callId) return p;
    }
    return -1;
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
  function toolCall(b, resultPos, parent) {
    const result = resultPos >= 0 ? entry(resultPos).message : null;
    const d = el("details", "tool" + (result && result.is_error ? " err" : ""));
    const args = jsonText(b.arguments);
    const mark = result ? (result.is_error ? " ✗" : " ✓") : " (no result)";
    const sum = el("summary", null, "🔧 ");
    sum.appendChild(el("span", "hl", b.name));
    sum.appendChild(document.createTextNode("(" + args.replace(/\s+/g, " ").slice(0, 160) + ")" + mark));
    d.appendChild(sum);
    d.appendChild(el("pre", "hl", args));
    if (result) {
      // The result is an entry of its own, shown here with its call.
      const box = el("div", "result");
      box.dataset.entry = String(resultPos);
      box.id = "e-" + ids[resultPos];
      if (resultPos === selected) box.classList.add("sel");
      box.appendChild(el("div", "note", "result" + (result.is_error ? " (error)" : "")));
      const body = el("div", "body");
      toolOutput(result.content, body);
      box.appendChild(body);
      d.appendChild(box);
    }
    parent.appendChild(d);
  }
  function toolOutput(c, parent) {
    if (typeof c === "string") { parent.appendChild(el("pre", "hl", c)); return; }
    for (const b of c || []) {
      if (b && b.type === "image") image(b, parent);
      else if (b && b.type === "text") parent.appendChild(el("pre", "hl", b.text));
    }
  }

  // A shell run (pi's bashExecution, "!cmd" in its editor): the command, its output
  // (folded when long), the exit code and the cancelled / truncated flags.
  const LONG_LINES = 20, LONG_CHARS = 2000;
  const present = (v) => v !== undefined && v !== null;
  function shellRun(m, body) {
    const cmd = el("div", "cmd");
    cmd.appendChild(el("span", "prompt", "$ "));
    cmd.appendChild(el("code", "hl", String(present(m.command) ? m.command : "")));
    body.appendChild(cmd);
    const out = String(present(m.output) ? m.output : "");
    const lines = out ? out.split("\n").length : 0;
    if (!out) body.appendChild(el("div", "note", "(no output)"));
    else if (lines > LONG_LINES || out.length > LONG_CHARS) {
      const d = el("details", "output");
      d.appendChild(el("summary", null, "output · " + lines.toLocaleString() + " lines, " + out.length.toLocaleString() + " characters"));
      d.appendChild(el("pre", "hl", out));
      body.appendChild(d);
    } else body.appendChild(el("pre", "hl", out));
    const flags = el("div", "flags");
    const code = m.exit_code;
    if (m.cancelled) flags.appendChild(el("span", "flag err", "cancelled"));
    if (present(code)) flags.appendChild(el("span", "flag exit" + (code === 0 ? "" : " err"), "exit " + code));
    else if (!m.cancelled) flags.appendChild(el("span", "flag exit", "no exit code"));
    if (m.truncated) {
      flags.appendChild(el("span", "flag", "output truncated" + (m.full_output_path ? " — full output in " + m.full_output_path : "")));
    }
    if (m.exclude_from_context) flags.appendChild(el("span", "flag", "not sent to the model"));
    body.appendChild(flags);
  }
  function shellLine(m) {
    let s = "$ " + (present(m.command) ? m.command : "");
    if (m.cancelled) s += " · cancelled";
    else if (present(m.exit_code) && m.exit_code !== 0) s += " · exit " + m.exit_code;
    return s;
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
        if (b.type === "text") md(b.text, body);
        else if (b.type === "thinking") thinking(b, body);
        else if (b.type === "tool_call") toolCall(b, findResult(i, b.id), body);
      }
      if (m.error_message) {
        const err = el("div", "err", "error: ");
        err.appendChild(el("span", "hl", m.error_message));
        body.appendChild(err);
      }
    } else if (role === "tool_result") {
      head.appendChild(el("span", null, m.tool_name + " · " + m.tool_call_id));
      const d = el("details", "tool" + (m.is_error ? " err" : ""));
      d.appendChild(el("summary", null, "result of " + m.tool_name + (m.is_error ? " ✗" : "")));
      toolOutput(m.content, d);
      body.appendChild(d);
    } else if (role === "custom") {
      head.appendChild(el("span", "hl", m.custom_type));
      content(m.content, body);
    } else if (role === "compaction_summary" || role === "branch_summary") md(m.summary, body);
    else if (role === "bash_execution") shellRun(m, body);
    else body.appendChild(el("pre", "hl", jsonText(m)));
  }

  // The texts search looks in, as shown in the page (Markdown as written).
  function contentFields(c, out) {
    if (typeof c === "string") { out.push(c); return; }
    if (!Array.isArray(c)) return;
    for (const b of c) {
      if (!b || typeof b !== "object") continue;
      if (b.type === "text") out.push(String(b.text));
      else if (b.type === "thinking" && !b.redacted) out.push(String(b.thinking || ""));
    }
  }
  function searchFields(pos) {
    const e = entry(pos), out = [];
    if (e.type === "message" && e.message) {
      const m = e.message, role = String(m.role);
      if (role === "user") contentFields(m.content, out);
      else if (role === "assistant") {
        for (const b of m.content || []) {
          if (!b || typeof b !== "object") continue;
          if (b.type === "text") out.push(String(b.text));
          else if (b.type === "thinking" && !b.redacted) out.push(String(b.thinking || ""));
          else if (b.type === "tool_call") out.push(String(b.name), jsonText(b.arguments));
        }
        if (m.error_message) out.push(String(m.error_message));
      } else if (role === "tool_result") {
        if (typeof m.content === "string") out.push(m.content);
        else for (const b of m.content || []) if (b && b.type === "text") out.push(String(b.text));
      } else if (role === "custom") { out.push(String(m.custom_type)); contentFields(m.content, out); }
      else if (role === "compaction_summary" || role === "branch_summary") out.push(String(m.summary));
      else if (role === "bash_execution") out.push(String(present(m.command) ? m.command : ""), String(present(m.output) ? m.output : ""));
      else out.push(jsonText(m));
    } else if (e.type === "compaction" || e.type === "branch_summary") out.push(String(e.summary));
    else if (e.type === "custom_message") { out.push(String(e.custom_type)); contentFields(e.content, out); }
    else if (META.has(e.type)) out.push(preview(pos));
    else out.push(jsonText(e));
    return out;
  }

  const META = new Set(["model_change", "thinking_level_change", "active_tools_change", "session_info", "label", "leaf", "custom"]);
  function card(i) {
    const pos = path[i], e = entry(pos), kn = kindName(pos);
    if (kn === "tool_result" && e.message && pairedAbove(i, e.message.tool_call_id)) return null;
    const art = el("article", "entry ek-" + kn + (META.has(e.type) ? " meta" : ""));
    art.id = "e-" + e.id;
    art.dataset.pos = String(pos);
    art.dataset.entry = String(pos);
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
      md(e.summary, body);
    } else if (e.type === "branch_summary") {
      body.appendChild(el("div", "note", "summary of the branch left at " + e.from_id));
      md(e.summary, body);
    } else if (e.type === "custom_message") {
      head.appendChild(el("span", "hl", e.custom_type));
      content(e.content, body);
    } else if (META.has(e.type)) body.appendChild(el("span", "hl", preview(pos)));
    else body.appendChild(el("pre", "hl", jsonText(e)));
    art.appendChild(body);
    if (terms) highlightEntries(art);
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
    $("branch").textContent = "branch: " + path.length.toLocaleString() + " entries, ends at " + (leafPos >= 0 ? shortId(leafPos) : "—") + (leafPos === sessionLeaf ? " (the session's leaf)" : "");
    if (!(await showConversation(i === undefined ? path.length - 1 : i))) return false;
    const target = entryBox(pos);
    if (target) {
      openFolds(target);
      target.scrollIntoView({ block: fromTree ? "center" : "start" });
    }
    return true;
  }
  // The element showing entry `pos` in the conversation: its card, or for a tool result
  // shown with its call, the box inside the call's fold.
  function entryBox(pos) { return conv.querySelector('[data-entry="' + pos + '"]'); }
  function openFolds(node) {
    for (let d = node.parentElement && node.parentElement.closest("details"); d; d = d.parentElement && d.parentElement.closest("details")) d.open = true;
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
  // The query language of `sessiontree search` and `repo.search` (docs/search.md), with
  // the same rules: words match whole tokens case-insensitively (tokens are runs of
  // letters, digits and other non-punctuation, cut at Unicode word boundaries where a
  // run holds ideographs, kana or emoji: Intl.Segmenter, as the engine's UAX #29 pass);
  // every word must appear in the entry; "quoted phrases" match consecutive tokens (so
  // does snake_case: "snake case"); -word excludes; a trailing * matches a prefix. A hit
  // is one occurrence of one positive term in a matching entry: the hits are counted,
  // listed by entry, marked in the conversation (<mark>), and Enter / Shift+Enter (or the
  // arrows) go to the next / previous one, across branches. The text searched is the
  // text shown: messages, thinking, tool calls (name and arguments) and results, shell
  // commands and output, summaries, and the line shown for other entries.
  const results = $("results"), q = $("q"), hitsOut = $("hits");
  let searchToken = 0, debounce = 0, searched = null, searching = Promise.resolve();
  let terms = null;
  let hitEntries = [], hitStart = [0], hitTotal = 0, cur = -1;
  // UAX #29's word rules for the runs that need them (the engine uses the
  // unicode-segmentation crate; Intl.Segmenter would use dictionaries and differ):
  // ideographs, kana other than katakana, Thai and its neighbours, emoji and symbols are
  // words of their own, katakana runs and letter/digit runs join, marks and emoji
  // modifiers (and a ZWJ sequence) stay with what they follow.
  const SINGLE = /[\p{Ideographic}\p{Script=Hiragana}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}]/u;
  const KATA = /[\p{Script=Katakana}\u30fc]/u, PICT = /\p{Extended_Pictographic}/u;
  const MARK = /[\p{M}\u200d\ufe0f\u{1f3fb}-\u{1f3ff}]/u, WORD = /[\p{L}\p{N}]/u;
  function wordClass(ch) {
    if (MARK.test(ch)) return "mark";
    if (PICT.test(ch)) return "pict";
    if (KATA.test(ch)) return "kata";
    if (SINGLE.test(ch)) return "single";
    return WORD.test(ch) ? "word" : "single";
  }
  function segment(text, s, e, push) {
    let start = -1, cls = null, zwj = false, i = s;
    for (const ch of text.slice(s, e)) {
      const c = wordClass(ch);
      if (start >= 0 && (c === "mark" || (zwj && c === "pict") || (c === cls && (c === "word" || c === "kata")))) {
        zwj = ch === "\u200d";
      } else {
        if (start >= 0) push(start, i);
        start = i; cls = c; zwj = false;
      }
      i += ch.length;
    }
    if (start >= 0) push(start, e);
  }
  const LETTER = /[\p{Alphabetic}\p{N}]/u;
  // Non-ASCII punctuation, as rust/engine/search/tokens.rs declares it.
  function punct(cp, ch) {
    if ((cp >= 0xa0 && cp <= 0xbf) || (cp >= 0x3000 && cp <= 0x303f)) return !LETTER.test(ch);
    if (cp === 0x200c || cp === 0x200d) return false;
    if ((cp >= 0x2000 && cp <= 0x206f) || (cp >= 0x2e00 && cp <= 0x2e7f)) return true;
    if ([0xd7, 0xf7, 0x30fb, 0x60c, 0x61b, 0x61f, 0x964, 0x965].includes(cp)) return true;
    return (cp >= 0x66a && cp <= 0x66d) || (cp >= 0xfe10 && cp <= 0xfe1f) || (cp >= 0xfe30 && cp <= 0xfe6f) ||
      (cp >= 0xff01 && cp <= 0xff0f) || (cp >= 0xff1a && cp <= 0xff20) || (cp >= 0xff3b && cp <= 0xff40) || (cp >= 0xff5b && cp <= 0xff65);
  }
  function tokenChar(ch) {
    const cp = ch.codePointAt(0);
    if (cp < 0x80) return /[A-Za-z0-9]/.test(ch);
    return !(/\s/u.test(ch) || /\p{Cc}/u.test(ch) || punct(cp, ch));
  }
  const joins = (cp) => cp < 0x0e00 || (cp >= 0x1e00 && cp < 0x2000);
  const lower = (ch) => (ch.toLowerCase()[Symbol.iterator]().next().value || ch);
  // The tokens of `text`: {t: lowercased, s, e} (UTF-16 offsets).
  function tokenize(text) {
    const out = [];
    const push = (s, e) => out.push({ t: [...text.slice(s, e)].map(lower).join(""), s, e });
    const run = (s, e, simple) => (simple ? push(s, e) : segment(text, s, e, push));
    let start = -1, simple = true, i = 0;
    for (const ch of text) {
      if (tokenChar(ch)) {
        if (start < 0) { start = i; simple = true; }
        if (!joins(ch.codePointAt(0))) simple = false;
      } else if (start >= 0) { run(start, i, simple); start = -1; }
      i += ch.length;
    }
    if (start >= 0) run(start, text.length, simple);
    return out;
  }
  // The terms of a query ({toks, prefix, neg}), or null when it has nothing to find.
  function parseQuery(query) {
    const out = [];
    let rest = query;
    for (;;) {
      rest = rest.replace(/^\s+/u, "");
      if (!rest) break;
      let neg = false;
      if (rest[0] === "-" && rest.length > 1 && !/\s/u.test(rest[1])) { neg = true; rest = rest.slice(1); }
      let body, after;
      if (rest[0] === '"') {
        const close = rest.indexOf('"', 1);
        if (close < 0) return null; // unbalanced: refused, as the engine refuses it
        body = rest.slice(1, close); after = rest.slice(close + 1);
      } else {
        const m = /[\s"]/u.exec(rest), end = m ? m.index : rest.length;
        body = rest.slice(0, end); after = rest.slice(end);
      }
      let prefix = false;
      if (after[0] === "*") { prefix = true; after = after.replace(/^\*+/, ""); }
      else if (body.endsWith("*")) { prefix = true; body = body.replace(/\*+$/, ""); }
      rest = after;
      const toks = tokenize(body).map((x) => x.t);
      if (toks.length) out.push({ toks, prefix, neg });
    }
    return out.some((t) => !t.neg) ? out : null;
  }
  function setQuery(query) { terms = parseQuery(query); }
  // Where the positive terms match in `toks`: [first token, count] pairs.
  function termMatches(term, toks, out) {
    const n = term.toks.length;
    let count = 0;
    for (let i = 0; i + n <= toks.length; i++) {
      let ok = true;
      for (let k = 0; k < n && ok; k++) {
        const have = toks[i + k].t, want = term.toks[k];
        ok = term.prefix && k === n - 1 ? have.startsWith(want) : have === want;
      }
      if (ok) { count++; if (out) out.push([i, n]); }
    }
    return count;
  }
  // The hits of an entry whose shown texts are `fields`: 0 unless every positive term and
  // no excluded one is found (in one text each).
  function entryHits(fields) {
    if (!terms) return 0;
    const all = fields.map(tokenize);
    let hits = 0;
    for (const term of terms) {
      const n = all.reduce((sum, toks) => sum + termMatches(term, toks, null), 0);
      if (term.neg ? n > 0 : n === 0) return 0;
      if (!term.neg) hits += n;
    }
    return hits;
  }
  // The spans [start, end) of the positive terms' matches in `text`.
  function spansIn(text) {
    const toks = tokenize(text), found = [];
    for (const term of terms) if (!term.neg) termMatches(term, toks, found);
    return found.map(([i, n]) => [toks[i].s, toks[i + n - 1].e]).sort((a, b) => a[0] - b[0]);
  }
  function matches(pos) {
    return !!terms && loaded(pos) && entryHits(searchFields(pos)) > 0;
  }
  // <mark> the hits in the entries shown in `root` (a card, or the conversation).
  function highlightEntries(root) {
    const boxes = [...root.querySelectorAll("[data-entry]")];
    if (root.dataset && root.dataset.entry !== undefined) boxes.push(root);
    for (const box of boxes) {
      if (!matches(Number(box.dataset.entry))) continue;
      const own = [...box.querySelectorAll(".hl")].filter((r) => r.closest("[data-entry]") === box);
      highlightIn(own);
    }
  }
  // <mark> each occurrence in the text nodes of `regions`.
  function highlightIn(regions) {
    const nodes = [];
    for (const region of regions) {
      const walk = document.createTreeWalker(region, NodeFilter.SHOW_TEXT);
      while (walk.nextNode()) if (walk.currentNode.parentNode.nodeName !== "MARK") nodes.push(walk.currentNode);
    }
    for (const t of nodes) {
      const text = t.nodeValue;
      let last = 0, frag = null;
      for (const [s, e] of spansIn(text)) {
        if (s < last) continue;
        if (!frag) frag = document.createDocumentFragment();
        if (s > last) frag.appendChild(document.createTextNode(text.slice(last, s)));
        frag.appendChild(el("mark", null, text.slice(s, e)));
        last = e;
      }
      if (!frag) continue;
      if (last < text.length) frag.appendChild(document.createTextNode(text.slice(last)));
      // A closed fold says it holds hits.
      for (let d = t.parentElement.closest("details"); d; d = d.parentElement && d.parentElement.closest("details")) d.classList.add("hashit");
      t.replaceWith(frag);
    }
  }
  function unhighlight(root) {
    for (const m of root.querySelectorAll("mark")) {
      const parent = m.parentNode;
      m.replaceWith(document.createTextNode(m.textContent));
      parent.normalize();
    }
    for (const d of root.querySelectorAll("details.hashit")) d.classList.remove("hashit");
  }
  function snippet(text, li) {
    const first = spansIn(text)[0], at = first ? first[0] : 0;
    const from = Math.max(0, at - 40);
    const s = (from > 0 ? "…" : "") + text.slice(from, at + 120).replace(/\s+/g, " ");
    const box = el("span", "hl", s);
    li.appendChild(box);
    highlightIn([box]);
  }
  function showCount(done) {
    if (!terms) { hitsOut.textContent = ""; return; }
    let t = hitTotal === 0 ? "no hits" : hitTotal.toLocaleString() + (hitTotal === 1 ? " hit" : " hits");
    if (hitTotal && cur >= 0) t = "hit " + (cur + 1).toLocaleString() + " of " + hitTotal.toLocaleString();
    hitsOut.textContent = done ? t : "searching… " + t;
    $("prev").hidden = $("next").hidden = hitTotal === 0;
  }
  function runSearch(query) {
    const token = ++searchToken;
    searched = query;
    results.replaceChildren();
    delete results.dataset.done;
    unhighlight(conv);
    setQuery(query);
    hitEntries = []; hitStart = [0]; hitTotal = 0; cur = -1;
    showCount(true);
    if (!terms) { results.dataset.done = "1"; searching = Promise.resolve(); return searching; }
    const status = el("li", "status", "searching…");
    results.appendChild(status);
    const LIMIT = 500; // entries listed; all hits are counted
    searching = (async () => {
      // First the entries on screen.
      await ensure([...conv.querySelectorAll("[data-entry]")].map((b) => Number(b.dataset.entry)));
      if (token !== searchToken) return;
      highlightEntries(conv);
      for (let c = 0; c < NCHUNKS; c++) {
        await loadChunk(c);
        if (token !== searchToken) return;
        const end = Math.min(N, (c + 1) * CHUNK);
        for (let pos = c * CHUNK; pos < end; pos++) {
          const fields = searchFields(pos), text = fields.join("\n");
          const n = entryHits(fields);
          if (!n) continue;
          hitEntries.push(pos);
          hitTotal += n;
          hitStart.push(hitTotal);
          if (hitEntries.length <= LIMIT) {
            const li = el("li", "hit");
            li.dataset.pos = String(pos);
            li.dataset.n = String(hitEntries.length - 1);
            li.appendChild(el("span", "k k-" + kindName(pos), kindName(pos) + " "));
            if (n > 1) li.appendChild(el("span", "n", "×" + n + " "));
            snippet(text, li);
            status.before(li);
          }
        }
        status.textContent = "searching… " + Math.floor((100 * (c + 1)) / NCHUNKS) + "%";
        showCount(false);
        if (c % 4 === 3) await new Promise((r) => setTimeout(r, 0));
      }
      if (token !== searchToken) return;
      const e = hitEntries.length;
      status.textContent = hitTotal
        ? hitTotal.toLocaleString() + (hitTotal === 1 ? " hit" : " hits") + " in " + e.toLocaleString() + (e === 1 ? " entry" : " entries") + (e > LIMIT ? " (the first " + LIMIT + " listed)" : "")
        : "no hits";
      showCount(true);
      results.dataset.done = "1";
    })();
    return searching;
  }
  // Hit `h` (0-based, over the whole session): select its entry and show its <mark>.
  async function showHit(h) {
    let lo = 0, hi = hitEntries.length - 1;
    while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (hitStart[mid] <= h) lo = mid; else hi = mid - 1; }
    const pos = hitEntries[lo], k = h - hitStart[lo];
    cur = h;
    showCount(true);
    let box = pos === selected ? entryBox(pos) : null;
    if (!box) {
      if (!(await select(pos, false)) || cur !== h) return;
      box = entryBox(pos);
    }
    for (const m of conv.querySelectorAll("mark.cur")) m.classList.remove("cur");
    if (!box) return;
    const marks = [...box.querySelectorAll("mark")].filter((m) => m.closest("[data-entry]") === box);
    const target = marks.length ? marks[Math.min(k, marks.length - 1)] : box;
    target.classList.add("cur");
    openFolds(target);
    target.scrollIntoView({ block: "center" });
  }
  async function step(delta) {
    clearTimeout(debounce);
    if (q.value !== searched) runSearch(q.value);
    const token = searchToken;
    await searching;
    if (token !== searchToken || !hitTotal) return;
    await showHit(cur < 0 ? (delta > 0 ? 0 : hitTotal - 1) : (cur + delta + hitTotal) % hitTotal);
  }
  q.addEventListener("input", () => {
    delete results.dataset.done;
    clearTimeout(debounce);
    debounce = setTimeout(() => runSearch(q.value), 200);
  });
  q.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter") { ev.preventDefault(); step(ev.shiftKey ? -1 : 1); }
    if (ev.key === "Escape") { q.value = ""; runSearch(""); }
  });
  $("next").addEventListener("click", () => step(1));
  $("prev").addEventListener("click", () => step(-1));
  results.addEventListener("click", (ev) => {
    const li = ev.target.closest ? ev.target.closest("li.hit") : null;
    if (li) showHit(hitStart[Number(li.dataset.n)]);
  });
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "/" && document.activeElement !== q) { ev.preventDefault(); q.focus(); }
  });

  // ---------------------------------------------------------------- start
  // The name when the session has one (the id then in the line below), else the id, once.
  const named = idx.session.name !== null && idx.session.name !== undefined && idx.session.name !== "";
  $("title").textContent = named ? idx.session.name : "session " + idx.session.id;
  $("meta").textContent = (named ? "session " + idx.session.id + " · " : "") + N.toLocaleString() + " entries · cwd " + idx.session.cwd + " · created " + idx.session.timestamp;
  document.title = (named ? idx.session.name : "session " + idx.session.id) + " · sessiontree";
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
