//! Did-you-mean: the names close to one an operator mistyped, and the texts of the refusals that name
//! verbs and modules.

/// Names close to `wanted`: those whose own name (after the last `::`) is similar to `wanted`'s, or that
/// contain `wanted` (when its own name has three characters or more). When `wanted` gives a module path,
/// the names whose path ends like it are kept, if there are any (`billing::send_invoice` suggests
/// `billing::send_invoices`, not `shipping::send_invoices`); else the same verb in another module is
/// suggested. At most three, the closest first.
///
/// Similar means at most a third of the characters of the longer of the two differ (edit distance, at
/// least one allowed): `send_invoice` is close to `send_invoices`, `v9` to `v0`, but `nope` is not close
/// to `sync`. The verb's own name is compared, not the full path, so that a shared module path
/// (`reports::nope`, `reports::sync`) does not make unrelated verbs alike.
pub(crate) fn close_to(wanted: &str, names: &[String]) -> Vec<String> {
    let (wanted_path, wanted_short) = split(wanted);
    let contained = wanted_short.chars().count() >= 3;
    // As many trailing segments of a name's path as `wanted` gives.
    let given = if wanted_path.is_empty() {
        0
    } else {
        wanted_path.matches("::").count() + 1
    };
    let mut scored: Vec<(bool, usize, usize, &String)> = names
        .iter()
        .filter_map(|name| {
            let (path, short) = split(name);
            let distance = edit_distance(wanted_short, short);
            let similar = !wanted_short.is_empty() && distance <= bound(wanted_short, short);
            (similar || (contained && name.contains(wanted))).then(|| {
                let mut tail: Vec<&str> = path.rsplit("::").take(given).collect();
                tail.reverse();
                let tail = tail.join("::");
                let path_distance = edit_distance(wanted_path, &tail);
                let other_path =
                    path_distance > bound(wanted_path, &tail) || (given > 0 && path.is_empty());
                (other_path, distance, path_distance, name)
            })
        })
        .collect();
    if scored.iter().any(|(other_path, ..)| !other_path) {
        scored.retain(|(other_path, ..)| !other_path);
    }
    scored.sort();
    scored.dedup_by(|a, b| a.3 == b.3);
    scored
        .into_iter()
        .take(3)
        .map(|(.., n)| n.clone())
        .collect()
}

/// A name's module path and its own name: `("billing", "send_invoices")`; `("", name)` without `::`.
fn split(name: &str) -> (&str, &str) {
    name.rsplit_once("::").unwrap_or(("", name))
}

/// The most edits between two similar names: a third of the longer's characters, at least one.
fn bound(a: &str, b: &str) -> usize {
    (a.chars().count().max(b.chars().count()) / 3).max(1)
}

/// The Levenshtein distance between `a` and `b`, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

/// No verb is `verb`: the verbs it may have meant, else what is known.
pub(crate) fn unknown_verb(
    verb: &str,
    module: Option<&str>,
    close: &[String],
    known: &[String],
) -> String {
    let mut message = match module {
        Some(module) => format!("unknown verb `{verb}` in module `{module}`"),
        None => format!("unknown verb `{verb}`"),
    };
    if !close.is_empty() {
        message.push_str(&format!("; did you mean {}?", either(close)));
    } else if known.is_empty() {
        message.push_str("; no verb is registered");
    } else if known.len() <= 10 {
        message.push_str(&format!("; expected one of: {}", list(known, ", ")));
    } else {
        message.push_str(&format!(
            "; {} verbs are registered: `cronverb status` lists them",
            known.len()
        ));
    }
    message
}

/// Why a verb's name inside its module is not enough, and what is: its full name when the candidates'
/// full names differ, `--module` when their modules do.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) fn ambiguous(verb: &str, candidates: &[(String, String)]) -> String {
    let unique = |key: fn(&(String, String)) -> &String| {
        let mut keys: Vec<&String> = candidates.iter().map(key).collect();
        keys.sort();
        keys.windows(2).all(|w| w[0] != w[1])
    };
    let advice = match (unique(|c| &c.1), unique(|c| &c.0)) {
        (true, true) => "name it in full or choose one with `--module`",
        (true, false) => "name it in full",
        (false, true) => "choose one with `--module`",
        (false, false) => "name it in full and choose its module with `--module`",
    };
    let shown: Vec<String> = candidates
        .iter()
        .map(|(module, verb)| format!("`{verb}` of module `{module}`"))
        .collect();
    format!(
        "verb `{verb}` is ambiguous; it may be {}; {advice}",
        either(&shown)
    )
}

/// What an unknown module could have been.
pub(crate) fn expected(known: &[String]) -> String {
    if known.is_empty() {
        "no module is registered".to_owned()
    } else {
        format!("expected one of: {}", list(known, ", "))
    }
}

/// `a`, `a or b`, `a, b or c`, each in backticks.
fn either(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [only] => list(std::slice::from_ref(only), ""),
        [rest @ .., last] => format!(
            "{} or {}",
            list(rest, ", "),
            list(std::slice::from_ref(last), "")
        ),
    }
}

/// The items in backticks (unless already), joined with `separator`.
pub(crate) fn list(items: &[String], separator: &str) -> String {
    items
        .iter()
        .map(|item| {
            if item.starts_with('`') {
                item.clone()
            } else {
                format!("`{item}`")
            }
        })
        .collect::<Vec<_>>()
        .join(separator)
}

#[cfg(test)]
mod tests {
    use super::{close_to, edit_distance};

    #[test]
    fn close_names_are_suggested() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        let names = [
            "billing::send_invoices".to_owned(),
            "billing::nightly_report".to_owned(),
        ];
        assert_eq!(close_to("send_invoice", &names), ["billing::send_invoices"]);
        assert_eq!(
            close_to("billing::send_invoces", &names),
            ["billing::send_invoices"]
        );
        assert!(close_to("cleanup", &names).is_empty());
    }

    /// The verb's own name decides: a shared module path does not make two verbs alike (`reports::nope`
    /// is not `reports::sync`, 4 edits in 13 characters), nor does a letter they both contain.
    #[test]
    fn only_names_above_the_similarity_bound_are_suggested() {
        let names = [
            "reports::sync",
            "reports::refresh_cache",
            "reports::daily_summary",
            "app::billing::send_invoices",
        ]
        .map(str::to_owned);
        assert!(close_to("reports::nope", &names).is_empty());
        assert!(close_to("nope", &names).is_empty());
        assert!(close_to("e", &names).is_empty());
        assert!(close_to("reports::", &names).is_empty());
        assert_eq!(close_to("reports::synk", &names), ["reports::sync"]);
        assert_eq!(
            close_to("reports::refresh_cach", &names),
            ["reports::refresh_cache"]
        );
        assert_eq!(close_to("refresh", &names), ["reports::refresh_cache"]);
        assert_eq!(close_to("report::sync", &names), ["reports::sync"]);
        // A name given with part of its module path; the verb's own name in another module.
        assert_eq!(
            close_to("billing::send_invoice", &names),
            ["app::billing::send_invoices"]
        );
        assert_eq!(
            close_to("reports::send_invoices", &names),
            ["app::billing::send_invoices"]
        );
        // The module path given picks among verbs of one name.
        let names = [
            "billing::send_invoices",
            "billing::reports::send_invoices",
            "send_invoices",
        ]
        .map(str::to_owned);
        assert_eq!(
            close_to("billing::send_invoice", &names),
            ["billing::send_invoices"]
        );
        assert_eq!(
            close_to("send_invoice", &names),
            [
                "billing::reports::send_invoices",
                "billing::send_invoices",
                "send_invoices"
            ]
        );
    }

    #[test]
    fn a_name_in_several_modules_is_suggested_once() {
        let names = ["big::v0", "big::v0", "big::v1", "big::v0"].map(str::to_owned);
        assert_eq!(close_to("big::v9", &names), ["big::v0", "big::v1"]);
    }

    #[test]
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    fn an_ambiguous_name_says_what_tells_the_verbs_apart() {
        use super::ambiguous;

        let candidates = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(m, v)| ((*m).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert_eq!(
            ambiguous("x", &candidates(&[("a", "a::x"), ("a", "b::x")])),
            "verb `x` is ambiguous; it may be `a::x` of module `a` or `b::x` of module `a`; name it in full"
        );
        assert_eq!(
            ambiguous(
                "x",
                &candidates(&[("a", "a::x"), ("b", "b::x"), ("c", "c::x")])
            ),
            "verb `x` is ambiguous; it may be `a::x` of module `a`, `b::x` of module `b` or `c::x` of \
             module `c`; name it in full or choose one with `--module`"
        );
        assert_eq!(
            ambiguous("x", &candidates(&[("a", "a::x"), ("b", "a::x")])),
            "verb `x` is ambiguous; it may be `a::x` of module `a` or `a::x` of module `b`; choose one \
             with `--module`"
        );
    }
}
