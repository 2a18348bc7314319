//! Did-you-mean: the names close to one an operator mistyped, and the texts of the refusals that name
//! verbs and modules.

/// Names close to `wanted`: within a small edit distance of it, in full or inside their module, or
/// containing it. At most three, the closest first.
pub(crate) fn close_to(wanted: &str, names: &[String]) -> Vec<String> {
    let limit = (wanted.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, &String)> = names
        .iter()
        .filter_map(|name| {
            let short = name.rsplit("::").next().unwrap_or(name);
            let distance = edit_distance(wanted, name).min(edit_distance(wanted, short));
            let contains = !wanted.is_empty() && name.contains(wanted);
            (distance <= limit || contains).then_some((distance, name))
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(3).map(|(_, n)| n.clone()).collect()
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
