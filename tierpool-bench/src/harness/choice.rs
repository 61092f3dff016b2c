//! A workload's strategies (the ways it compares of doing one thing), written once: the
//! [`Choice`] trait and the [`choices!`](crate::choices) macro that declares an enum and its
//! table of ids, labels and set-up descriptions.

/// One of a workload's strategies: what a child process is told (`--contender ID`), what the
/// report calls it, and how it is set up (the report's list of contenders).
pub trait Choice: Copy + PartialEq + Sized + 'static {
    /// Every strategy, in report order.
    const ALL: &'static [Self];
    /// The `--contender` id of a child process.
    fn id(self) -> &'static str;
    /// The label in tables and charts.
    fn label(self) -> &'static str;
    /// How it is set up, for the report's list of contenders.
    fn description(self) -> &'static str;
    /// Parses [`Choice::id`].
    fn from_id(id: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|s| s.id() == id)
    }
}

/// Declares a strategy enum and its [`Choice`] impl from one table, a row per variant:
/// `Variant => ("id", "label", description)`, in report order. The description is any
/// `&'static str` expression.
///
/// ```
/// tierpool_bench::choices! {
///     /// How a block gets its buffer.
///     pub enum Strategy {
///         /// From the pool.
///         Pooled => ("pooled", "tierpool", "pool.get(n)"),
///         /// Fresh.
///         Fresh => ("fresh", "Vec", "Vec::with_capacity(n)"),
///     }
/// }
/// use tierpool_bench::harness::choice::Choice as _;
/// assert_eq!(Strategy::from_id("fresh"), Some(Strategy::Fresh));
/// assert_eq!(Strategy::ALL, &[Strategy::Pooled, Strategy::Fresh]);
/// ```
#[macro_export]
macro_rules! choices {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[$vmeta:meta])*
                $variant:ident => ($id:literal, $label:literal, $description:expr $(,)?)
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $crate::harness::choice::Choice for $name {
            const ALL: &'static [Self] = &[$($name::$variant),+];

            fn id(self) -> &'static str {
                match self {
                    $($name::$variant => $id,)+
                }
            }

            fn label(self) -> &'static str {
                match self {
                    $($name::$variant => $label,)+
                }
            }

            fn description(self) -> &'static str {
                match self {
                    $($name::$variant => $description,)+
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::Choice;

    crate::choices! {
        /// A test enum.
        enum Two {
            /// One.
            A => ("a", "the a", "set up as a"),
            /// Two.
            B => ("b", "the b", concat!("set up ", "as b")),
        }
    }

    #[test]
    fn ids_labels_descriptions_round_trip() {
        assert_eq!(Two::ALL, &[Two::A, Two::B]);
        for &s in Two::ALL {
            assert_eq!(Two::from_id(s.id()), Some(s));
        }
        assert_eq!(Two::B.label(), "the b");
        assert_eq!(Two::B.description(), "set up as b");
        assert_eq!(Two::from_id("c"), None);
    }
}
