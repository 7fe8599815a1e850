//! Name tables: each fixed set of strings the format or the API defines (entry types,
//! roles, error codes, durability modes) is one `const` table of `(value, name)` pairs,
//! declared beside its enum. Parsing, printing and the list the Python binding exports
//! (`sessiontree._core.ENTRY_TYPES`, …) are all read from that table.

/// The names of a table, in table order (the list exported to Python).
pub const fn names<T: Copy, const N: usize>(table: &[(T, &'static str); N]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = table[i].1;
        i += 1;
    }
    out
}

/// The value named `name`, if the table has it.
pub fn lookup<T: Copy>(table: &[(T, &'static str)], name: &str) -> Option<T> {
    table.iter().find(|(_, n)| *n == name).map(|&(v, _)| v)
}

/// The name of `value` in the table, if it has one.
pub fn name_of<T: Copy + PartialEq>(table: &[(T, &'static str)], value: T) -> Option<&'static str> {
    table.iter().find(|(v, _)| *v == value).map(|&(_, n)| n)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use crate::engine::arena::{Kind, Role, ENTRY_TYPES, HEADER_TYPE, MESSAGE_ROLES};
    use crate::engine::error::{ErrorCode, ERROR_CODES};
    use crate::engine::jsonl::{Durability, DURABILITY_MODES};
    use crate::engine::model::{STOP_REASONS, THINKING_LEVELS};

    fn distinct(names: &[&str]) -> bool {
        names.iter().collect::<HashSet<_>>().len() == names.len() && !names.contains(&"")
    }

    #[test]
    fn every_exported_set_is_distinct_and_non_empty() {
        for set in [
            &ENTRY_TYPES[..],
            &MESSAGE_ROLES,
            THINKING_LEVELS,
            STOP_REASONS,
            &ERROR_CODES,
            &DURABILITY_MODES,
        ] {
            assert!(distinct(set), "{set:?}");
        }
    }

    #[test]
    fn kinds_parse_and_print_through_one_table() {
        for name in ENTRY_TYPES {
            let kind = Kind::from_type(name);
            assert!(!matches!(kind, Kind::Unknown | Kind::Header), "{name}");
            assert_eq!(kind.name(), name);
        }
        assert_eq!(Kind::from_type(HEADER_TYPE), Kind::Header);
        assert_eq!(Kind::Header.name(), "session");
        assert_eq!(Kind::from_type("future_thing"), Kind::Unknown);
        assert_eq!(Kind::Unknown.name(), "unknown");
    }

    #[test]
    fn roles_parse_and_print_through_one_table() {
        for name in MESSAGE_ROLES {
            let role = Role::from_name(name);
            assert!(!matches!(role, Role::Other | Role::None), "{name}");
            assert_eq!(role.name(), Some(name));
        }
        assert_eq!(Role::from_name("bash_execution"), Role::Other);
        assert_eq!(Role::Other.name(), Some("other"));
        assert_eq!(Role::None.name(), None);
    }

    #[test]
    fn error_codes_index_by_discriminant() {
        assert_eq!(ErrorCode::ALL.len(), ERROR_CODES.len());
        for (i, code) in ErrorCode::ALL.into_iter().enumerate() {
            assert_eq!(code as usize, i);
            assert_eq!(code.as_str(), ERROR_CODES[i]);
        }
        assert_eq!(ErrorCode::LimitExceeded.as_str(), "limit_exceeded");
    }

    #[test]
    fn durability_modes_parse_in_order() {
        let parsed: Vec<_> = DURABILITY_MODES
            .iter()
            .map(|m| Durability::parse(m).unwrap())
            .collect();
        let expected = [
            Durability::None,
            Durability::Flush,
            Durability::Group,
            Durability::Fsync,
        ];
        assert_eq!(parsed, expected);
        let err = Durability::parse("sometimes").unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidArgument);
        assert_eq!(
            err.message,
            r#"durability must be one of none, flush, group, fsync (got "sometimes")"#
        );
    }
}
