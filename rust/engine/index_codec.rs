//! The arena's part of the persisted index: its state as little-endian bytes and back.
//!
//! Only `index` calls this; it frames these bytes with the checks that say whether they
//! may be trusted, and `decode` still refuses anything inconsistent.

use std::sync::OnceLock;

use crate::engine::arena::{Arena, Kind, Node, Role, Stats, StrRef, NONE};
use crate::engine::types::UsageSums;

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
        out.extend_from_slice(&(self.usages.len() as u64).to_le_bytes());
        for (idx, u) in &self.usages {
            out.extend_from_slice(&idx.to_le_bytes());
            for v in [
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
                repeat: false,
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
        let count = usize::try_from(c.u64()?).ok()?;
        // 52 bytes each, and in index order: refuse what the bytes cannot hold first.
        if count.checked_mul(52)? > c.buf.len() || count > arena.nodes.len() {
            return None;
        }
        arena.usages.reserve_exact(count);
        for _ in 0..count {
            let idx = c.u32()?;
            let mut v = [0u64; 5];
            for slot in &mut v {
                *slot = c.u64()?;
            }
            let ordered = arena.usages.last().is_none_or(|(prev, _)| *prev < idx);
            if idx >= n || !ordered {
                return None;
            }
            arena.usages.push((
                idx,
                UsageSums {
                    input: v[0],
                    output: v[1],
                    cache_read: v[2],
                    cache_write: v[3],
                    total_tokens: v[4],
                    cost_total: c.f64()?,
                },
            ));
        }
        Some(arena)
    }
}
