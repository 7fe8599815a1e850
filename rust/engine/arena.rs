//! The entry arena: entries in file order with parent links, an id index, a children
//! index, labels, the session name, the replayed leaf and running stats.
//!
//! Entries reference each other by arena index (`u32`), never by pointer. A parent is
//! always an earlier entry (a `parent_id` naming no earlier entry makes a root), so the
//! parent links form a forest and every walk terminates; all walks are loops.

use std::collections::HashMap;

use std::hash::BuildHasher;
use std::sync::OnceLock;

use hashbrown::HashTable;

use crate::engine::line::{ParsedEntry, UsageSums};

/// "No entry": a root's parent, a missing target, the leaf before any entry.
pub const NONE: u32 = u32::MAX;

/// The entry types of FORMAT.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// The `session` header line (never an arena entry).
    Header,
    /// `message`
    Message,
    /// `thinking_level_change`
    ThinkingLevelChange,
    /// `model_change`
    ModelChange,
    /// `active_tools_change`
    ActiveToolsChange,
    /// `compaction`
    Compaction,
    /// `branch_summary`
    BranchSummary,
    /// `custom`
    Custom,
    /// `custom_message`
    CustomMessage,
    /// `label`
    Label,
    /// `session_info`
    SessionInfo,
    /// `leaf`
    Leaf,
    /// Any other type, kept byte-for-byte.
    Unknown,
}

impl Kind {
    /// The kind for a `type` string.
    pub fn from_type(name: &str) -> Kind {
        match name {
            "session" => Kind::Header,
            "message" => Kind::Message,
            "thinking_level_change" => Kind::ThinkingLevelChange,
            "model_change" => Kind::ModelChange,
            "active_tools_change" => Kind::ActiveToolsChange,
            "compaction" => Kind::Compaction,
            "branch_summary" => Kind::BranchSummary,
            "custom" => Kind::Custom,
            "custom_message" => Kind::CustomMessage,
            "label" => Kind::Label,
            "session_info" => Kind::SessionInfo,
            "leaf" => Kind::Leaf,
            _ => Kind::Unknown,
        }
    }
}

/// The role of a `message` entry (`None` for other entries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Role {
    /// Not a message entry.
    None,
    /// `user`
    User,
    /// `assistant`
    Assistant,
    /// `tool_result`
    ToolResult,
    /// `custom`
    Custom,
    /// `compaction_summary`
    CompactionSummary,
    /// `branch_summary`
    BranchSummary,
    /// Any other role.
    Other,
}

impl Role {
    /// The role for a `role` string.
    pub fn from_name(name: &str) -> Role {
        match name {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool_result" => Role::ToolResult,
            "custom" => Role::Custom,
            "compaction_summary" => Role::CompactionSummary,
            "branch_summary" => Role::BranchSummary,
            _ => Role::Other,
        }
    }
}

/// Whole-session counts and usage sums (every branch).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Stats {
    /// Entries in the arena.
    pub entry_count: u64,
    /// `message` entries of any role.
    pub message_count: u64,
    /// User messages.
    pub user_message_count: u64,
    /// Assistant messages.
    pub assistant_message_count: u64,
    /// Tool results.
    pub tool_result_count: u64,
    /// Usage summed over assistant messages, compactions and branch summaries.
    pub usage: UsageSums,
}

#[derive(Debug, Clone, Copy)]
struct StrRef {
    start: u32,
    len: u32,
}

/// One entry: its tree links and where its raw line lives.
#[derive(Debug, Clone)]
pub struct Node {
    /// Entry type.
    pub kind: Kind,
    /// Message role (messages only).
    pub role: Role,
    /// A compaction with a non-null `retained_tail`.
    pub retained_tail: bool,
    /// Parent index or [`NONE`].
    pub parent: u32,
    /// Leaf / label target, or a compaction's first kept entry; [`NONE`] if absent or unknown.
    pub target: u32,
    first_child: u32,
    last_child: u32,
    next_sibling: u32,
    /// Byte offset of the line in the backing store.
    pub offset: u64,
    /// Line length in bytes, without the newline.
    pub len: u32,
    /// 1-based line number in the file (the header is line 1).
    pub line_no: u64,
    id: StrRef,
    ts: StrRef,
}

/// A reference problem found while adding an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefProblem {
    /// The id is already in the session.
    DuplicateId,
    /// `parent_id` names no earlier entry.
    DanglingParent,
    /// A `leaf` entry's target is unknown.
    UnknownLeafTarget,
    /// A `label` entry's target is unknown.
    UnknownLabelTarget,
}

/// The in-memory index of one session.
pub struct Arena {
    nodes: Vec<Node>,
    /// Ids and timestamps of every entry, back to back.
    pool: String,
    /// id → arena index; built on first use after loading a persisted index, so a
    /// reopen that only walks parents never pays for it.
    index: OnceLock<HashTable<u32>>,
    hasher: foldhash::quality::RandomState,
    first_root: u32,
    last_root: u32,
    labels: HashMap<u32, Box<str>, foldhash::quality::RandomState>,
    unknown_types: HashMap<u32, Box<str>, foldhash::quality::RandomState>,
    name: Option<Box<str>>,
    leaf: u32,
    newest: Option<StrRef>,
    stats: Stats,
}

impl Default for Arena {
    fn default() -> Self {
        Self::new()
    }
}

impl Arena {
    /// An empty arena.
    pub fn new() -> Self {
        Arena {
            nodes: Vec::new(),
            pool: String::new(),
            index: OnceLock::from(HashTable::new()),
            hasher: foldhash::quality::RandomState::default(),
            first_root: NONE,
            last_root: NONE,
            labels: HashMap::default(),
            unknown_types: HashMap::default(),
            name: None,
            leaf: NONE,
            newest: None,
            stats: Stats::default(),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The node at `idx`.
    pub fn node(&self, idx: u32) -> &Node {
        &self.nodes[idx as usize]
    }

    fn text(&self, r: StrRef) -> &str {
        &self.pool[r.start as usize..(r.start + r.len) as usize]
    }

    /// True when `r` is a valid slice of the pool.
    fn in_pool(&self, r: StrRef) -> bool {
        (r.start as usize)
            .checked_add(r.len as usize)
            .is_some_and(|end| end <= self.pool.len())
            && self.pool.is_char_boundary(r.start as usize)
            && self.pool.is_char_boundary((r.start + r.len) as usize)
    }

    fn intern(&mut self, s: &str) -> StrRef {
        let start = self.pool.len() as u32;
        self.pool.push_str(s);
        StrRef {
            start,
            len: s.len() as u32,
        }
    }

    /// The id of the entry at `idx`.
    pub fn id(&self, idx: u32) -> &str {
        self.text(self.nodes[idx as usize].id)
    }

    /// The timestamp of the entry at `idx`.
    pub fn timestamp(&self, idx: u32) -> &str {
        self.text(self.nodes[idx as usize].ts)
    }

    /// The `type` string of an unknown entry.
    pub fn unknown_type(&self, idx: u32) -> Option<&str> {
        self.unknown_types.get(&idx).map(|s| &**s)
    }

    /// The arena index of `id`.
    pub fn lookup(&self, id: &str) -> Option<u32> {
        let hash = self.hasher.hash_one(id);
        self.table()
            .find(hash, |&i| self.text(self.nodes[i as usize].id) == id)
            .copied()
    }

    fn table(&self) -> &HashTable<u32> {
        self.index.get_or_init(|| {
            let mut table = HashTable::with_capacity(self.nodes.len());
            for (i, node) in self.nodes.iter().enumerate() {
                let hash = self.hasher.hash_one(self.text(node.id));
                table.insert_unique(hash, i as u32, |&j| {
                    self.hasher.hash_one(self.text(self.nodes[j as usize].id))
                });
            }
            table
        })
    }

    /// The replayed leaf ([`NONE`] before the first entry or after a move to none).
    pub fn leaf(&self) -> u32 {
        self.leaf
    }

    /// The label currently on `idx`.
    pub fn label(&self, idx: u32) -> Option<&str> {
        self.labels.get(&idx).map(|s| &**s)
    }

    /// Every labelled entry with its label (unordered).
    pub fn labels(&self) -> impl Iterator<Item = (u32, &str)> {
        self.labels.iter().map(|(&i, s)| (i, &**s))
    }

    /// The session name from the last `session_info` entry.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The greatest entry timestamp (ISO strings compare in time order).
    pub fn newest_timestamp(&self) -> Option<&str> {
        self.newest.map(|r| self.text(r))
    }

    /// Whole-session stats.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Checks the references of `e` against the arena without changing it.
    ///
    /// Returns the resolved parent, target and problems. A `DuplicateId` problem means the
    /// entry must not be added.
    pub fn resolve(&self, e: &ParsedEntry<'_>) -> (u32, u32, Vec<RefProblem>) {
        let mut problems = Vec::new();
        if self.lookup(&e.id).is_some() {
            problems.push(RefProblem::DuplicateId);
        }
        let parent = match &e.parent_id {
            None => NONE,
            Some(pid) => self.lookup(pid).unwrap_or_else(|| {
                problems.push(RefProblem::DanglingParent);
                NONE
            }),
        };
        let target_name = match e.kind {
            crate::engine::Kind::Compaction => e.first_kept.as_deref(),
            _ => e.target_id.as_deref(),
        };
        let target = match target_name {
            None => NONE,
            Some(t) => match self.lookup(t) {
                Some(i) => i,
                None => {
                    match e.kind {
                        Kind::Leaf => problems.push(RefProblem::UnknownLeafTarget),
                        Kind::Label => problems.push(RefProblem::UnknownLabelTarget),
                        _ => {}
                    }
                    NONE
                }
            },
        };
        (parent, target, problems)
    }

    /// Adds an entry whose references were resolved by [`Arena::resolve`]; returns its index.
    ///
    /// The caller must not add an entry that `resolve` reported as a duplicate.
    pub fn push(
        &mut self,
        e: &ParsedEntry<'_>,
        parent: u32,
        target: u32,
        offset: u64,
        len: u32,
        line_no: u64,
    ) -> u32 {
        let idx = self.nodes.len() as u32;
        let id = self.intern(&e.id);
        let ts = self.intern(&e.timestamp);
        self.nodes.push(Node {
            kind: e.kind,
            role: e.role,
            retained_tail: e.retained_tail,
            parent,
            target,
            first_child: NONE,
            last_child: NONE,
            next_sibling: NONE,
            offset,
            len,
            line_no,
            id,
            ts,
        });
        let hash = self.hasher.hash_one(&*e.id);
        self.table();
        let (nodes, pool, hasher) = (&self.nodes, &self.pool, &self.hasher);
        if let Some(table) = self.index.get_mut() {
            table.insert_unique(hash, idx, |&i| {
                let r = nodes[i as usize].id;
                hasher.hash_one(&pool[r.start as usize..(r.start + r.len) as usize])
            });
        }
        self.link_child(parent, idx);
        if self.newest.is_none_or(|n| self.text(n) < &*e.timestamp) {
            self.newest = Some(ts);
        }
        match e.kind {
            Kind::Leaf => {
                if e.target_id.is_none() {
                    self.leaf = NONE;
                } else if target != NONE {
                    self.leaf = target;
                }
            }
            _ => self.leaf = idx,
        }
        match e.kind {
            Kind::Label if target != NONE => match &e.text {
                Some(label) => {
                    self.labels.insert(target, label.as_ref().into());
                }
                None => {
                    self.labels.remove(&target);
                }
            },
            Kind::SessionInfo => self.name = e.text.as_deref().map(Into::into),
            Kind::Unknown => {
                self.unknown_types.insert(idx, e.type_name.as_ref().into());
            }
            _ => {}
        }
        self.count(e);
        idx
    }

    fn link_child(&mut self, parent: u32, idx: u32) {
        let (first, last) = if parent == NONE {
            (&mut self.first_root, &mut self.last_root)
        } else {
            let p = &mut self.nodes[parent as usize];
            (&mut p.first_child, &mut p.last_child)
        };
        let prev_last = *last;
        *last = idx;
        if prev_last == NONE {
            *first = idx;
        } else {
            self.nodes[prev_last as usize].next_sibling = idx;
        }
    }

    fn count(&mut self, e: &ParsedEntry<'_>) {
        let s = &mut self.stats;
        s.entry_count += 1;
        if e.kind == Kind::Message {
            s.message_count += 1;
            match e.role {
                Role::User => s.user_message_count += 1,
                Role::Assistant => s.assistant_message_count += 1,
                Role::ToolResult => s.tool_result_count += 1,
                _ => {}
            }
        }
        if let Some(u) = e.usage {
            s.usage.input += u.input;
            s.usage.output += u.output;
            s.usage.cache_read += u.cache_read;
            s.usage.cache_write += u.cache_write;
            s.usage.total_tokens += u.total_tokens;
            s.usage.cost_total += u.cost_total;
        }
    }

    /// The children of `parent` in file order ([`NONE`] lists the roots).
    pub fn children(&self, parent: u32) -> Children<'_> {
        let next = if parent == NONE {
            self.first_root
        } else {
            self.nodes[parent as usize].first_child
        };
        Children { arena: self, next }
    }

    /// The entries from the root down to `idx` (empty for [`NONE`]).
    pub fn path_to_root(&self, idx: u32) -> Vec<u32> {
        let mut path = Vec::new();
        let mut cur = idx;
        while cur != NONE {
            path.push(cur);
            cur = self.nodes[cur as usize].parent;
        }
        path.reverse();
        path
    }

    /// The path from `idx` up to the root or to the nearest compaction's cut (FORMAT.md),
    /// root-first.
    pub fn path_to_root_or_compaction(&self, idx: u32) -> Vec<u32> {
        let mut path = Vec::new();
        let mut cur = idx;
        while cur != NONE {
            path.push(cur);
            let node = &self.nodes[cur as usize];
            if node.kind == Kind::Compaction {
                if !node.retained_tail && node.target != NONE {
                    let at_compaction = path.len();
                    let mut up = node.parent;
                    let mut found = false;
                    while up != NONE {
                        path.push(up);
                        if up == node.target {
                            found = true;
                            break;
                        }
                        up = self.nodes[up as usize].parent;
                    }
                    if !found {
                        path.truncate(at_compaction);
                    }
                }
                break;
            }
            cur = node.parent;
        }
        path.reverse();
        path
    }

    /// Indices of the entries whose `type` is `type_name`, in file order.
    pub fn find(&self, type_name: &str) -> Vec<u32> {
        let kind = Kind::from_type(type_name);
        if kind == Kind::Header {
            return Vec::new();
        }
        (0..self.nodes.len() as u32)
            .filter(|&i| {
                let n = &self.nodes[i as usize];
                n.kind == kind && (kind != Kind::Unknown || self.unknown_type(i) == Some(type_name))
            })
            .collect()
    }

    /// Every entry of the subtree under `root` (itself included), parents before children.
    pub fn subtree(&self, root: u32) -> Vec<u32> {
        let mut out = Vec::new();
        let mut stack = vec![root];
        while let Some(i) = stack.pop() {
            out.push(i);
            let before = stack.len();
            stack.extend(self.children(i));
            stack[before..].reverse();
        }
        out
    }
}

/// Iterator over children in file order.
pub struct Children<'a> {
    arena: &'a Arena,
    next: u32,
}

impl Iterator for Children<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        if self.next == NONE {
            return None;
        }
        let cur = self.next;
        self.next = self.arena.nodes[cur as usize].next_sibling;
        Some(cur)
    }
}

/// Little-endian reader over an index file's bytes; every read is bounds-checked.
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `buf`.
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    /// The next `n` bytes.
    pub(crate) fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let out = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }

    pub(crate) fn u8(&mut self) -> Option<u8> {
        self.bytes(1).map(|b| b[0])
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.bytes(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn u64(&mut self) -> Option<u64> {
        let b = self.bytes(8)?;
        Some(u64::from_le_bytes([
            b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
        ]))
    }

    pub(crate) fn f64(&mut self) -> Option<f64> {
        self.u64().map(f64::from_bits)
    }

    /// A length-prefixed UTF-8 string.
    pub(crate) fn text(&mut self) -> Option<&'a str> {
        let n = self.u32()? as usize;
        std::str::from_utf8(self.bytes(n)?).ok()
    }

    /// True when every byte was read.
    pub(crate) fn at_end(&self) -> bool {
        self.pos == self.buf.len()
    }
}

fn put_text(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn kind_from_u8(v: u8) -> Option<Kind> {
    Some(match v {
        1 => Kind::Message,
        2 => Kind::ThinkingLevelChange,
        3 => Kind::ModelChange,
        4 => Kind::ActiveToolsChange,
        5 => Kind::Compaction,
        6 => Kind::BranchSummary,
        7 => Kind::Custom,
        8 => Kind::CustomMessage,
        9 => Kind::Label,
        10 => Kind::SessionInfo,
        11 => Kind::Leaf,
        12 => Kind::Unknown,
        _ => return None,
    })
}

fn role_from_u8(v: u8) -> Option<Role> {
    Some(match v {
        0 => Role::None,
        1 => Role::User,
        2 => Role::Assistant,
        3 => Role::ToolResult,
        4 => Role::Custom,
        5 => Role::CompactionSummary,
        6 => Role::BranchSummary,
        7 => Role::Other,
        _ => return None,
    })
}

impl Arena {
    /// Appends the arena's persistent state to `out` (the persisted index's body).
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.pool.len() as u64).to_le_bytes());
        out.extend_from_slice(self.pool.as_bytes());
        out.extend_from_slice(&(self.nodes.len() as u64).to_le_bytes());
        for n in &self.nodes {
            out.push(n.kind as u8);
            out.push(n.role as u8);
            out.push(u8::from(n.retained_tail));
            for v in [
                n.parent, n.target, n.len, n.id.start, n.id.len, n.ts.start, n.ts.len,
            ] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(&n.offset.to_le_bytes());
            out.extend_from_slice(&n.line_no.to_le_bytes());
        }
        for map in [&self.labels, &self.unknown_types] {
            out.extend_from_slice(&(map.len() as u64).to_le_bytes());
            for (idx, text) in map {
                out.extend_from_slice(&idx.to_le_bytes());
                put_text(out, text);
            }
        }
        match &self.name {
            Some(name) => {
                out.push(1);
                put_text(out, name);
            }
            None => out.push(0),
        }
        out.extend_from_slice(&self.leaf.to_le_bytes());
        match self.newest {
            Some(r) => {
                out.push(1);
                out.extend_from_slice(&r.start.to_le_bytes());
                out.extend_from_slice(&r.len.to_le_bytes());
            }
            None => out.push(0),
        }
        let s = &self.stats;
        let u = &s.usage;
        for v in [
            s.entry_count,
            s.message_count,
            s.user_message_count,
            s.assistant_message_count,
            s.tool_result_count,
            u.input,
            u.output,
            u.cache_read,
            u.cache_write,
            u.total_tokens,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&u.cost_total.to_bits().to_le_bytes());
    }

    /// Rebuilds an arena from [`Arena::encode`]'s bytes; `None` for anything inconsistent.
    ///
    /// Every index and string reference is checked, so a damaged index can never make the
    /// arena point outside itself; children lists and the id index are rebuilt.
    pub(crate) fn decode(c: &mut Cursor<'_>) -> Option<Arena> {
        let pool_len = usize::try_from(c.u64()?).ok()?;
        let mut arena = Arena::new();
        arena.pool = String::from_utf8(c.bytes(pool_len)?.to_vec()).ok()?;
        let count = usize::try_from(c.u64()?).ok()?;
        // 47 bytes a node: refuse counts the remaining bytes cannot hold before allocating.
        if count.checked_mul(47)? > c.buf.len() {
            return None;
        }
        arena.nodes.reserve_exact(count);
        arena.index = OnceLock::new();
        for i in 0..count {
            let kind = kind_from_u8(c.u8()?)?;
            let role = role_from_u8(c.u8()?)?;
            let retained_tail = c.u8()? != 0;
            let (parent, target, len) = (c.u32()?, c.u32()?, c.u32()?);
            let id = StrRef {
                start: c.u32()?,
                len: c.u32()?,
            };
            let ts = StrRef {
                start: c.u32()?,
                len: c.u32()?,
            };
            let (offset, line_no) = (c.u64()?, c.u64()?);
            let earlier = |x: u32| x == NONE || (x as usize) < i;
            if !arena.in_pool(id) || !arena.in_pool(ts) || !earlier(parent) || !earlier(target) {
                return None;
            }
            let idx = i as u32;
            arena.nodes.push(Node {
                kind,
                role,
                retained_tail,
                parent,
                target,
                first_child: NONE,
                last_child: NONE,
                next_sibling: NONE,
                offset,
                len,
                line_no,
                id,
                ts,
            });
            arena.link_child(parent, idx);
        }
        let n = arena.nodes.len() as u32;
        for which in 0..2 {
            let entries = c.u64()?;
            for _ in 0..entries {
                let idx = c.u32()?;
                let text: Box<str> = c.text()?.into();
                if idx >= n {
                    return None;
                }
                if which == 0 {
                    arena.labels.insert(idx, text);
                } else {
                    arena.unknown_types.insert(idx, text);
                }
            }
        }
        arena.name = match c.u8()? {
            0 => None,
            _ => Some(c.text()?.into()),
        };
        arena.leaf = c.u32()?;
        if arena.leaf != NONE && arena.leaf >= n {
            return None;
        }
        arena.newest = match c.u8()? {
            0 => None,
            _ => {
                let r = StrRef {
                    start: c.u32()?,
                    len: c.u32()?,
                };
                if !arena.in_pool(r) {
                    return None;
                }
                Some(r)
            }
        };
        let mut v = [0u64; 10];
        for slot in &mut v {
            *slot = c.u64()?;
        }
        arena.stats = Stats {
            entry_count: v[0],
            message_count: v[1],
            user_message_count: v[2],
            assistant_message_count: v[3],
            tool_result_count: v[4],
            usage: UsageSums {
                input: v[5],
                output: v[6],
                cache_read: v[7],
                cache_write: v[8],
                total_tokens: v[9],
                cost_total: c.f64()?,
            },
        };
        Some(arena)
    }
}
