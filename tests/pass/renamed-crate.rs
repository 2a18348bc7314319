//! `crate = "…"` names the cronverb crate where the generated code cannot reach it as `::cronverb`: under
//! another name, or through a re-export. tests/modules.rs builds a package whose only dependency on
//! cronverb is renamed.

extern crate cronverb as cv;

use cv::MissedPolicy;
use cv::__private::{Registration, inventory};

/// Reaches cronverb through a path of this crate.
mod jobs_api {
    pub use cronverb as scheduler;
}

/// Runs under another name.
#[cv::cron("0 2 * * *", crate = "cv")]
async fn renamed() {}

#[jobs_api::scheduler::cron(
    "0 3 * * *",
    crate = "crate::jobs_api::scheduler",
    name = "billing::reexported",
    missed = "skip"
)]
async fn through_a_reexport() -> Result<(), std::io::Error> {
    Err(std::io::Error::other("disk full"))
}

mod nested {
    #[cv::cron("*/5 * * * *", crate = "::cv", timezone = "Europe/Berlin")]
    pub(crate) async fn absolute() {}
}

/// The crate's name (trybuild names it), as `module_path!()` spells it at the root.
const ROOT: &str = module_path!();

fn find(name: &str) -> &'static Registration {
    inventory::iter::<Registration>
        .into_iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no registration named {name}"))
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();

    let under_another_name = find(&format!("{ROOT}::renamed"));
    assert_eq!(under_another_name.expression, "0 2 * * *");
    assert_eq!(under_another_name.doc, "Runs under another name.");
    assert_eq!(runtime.block_on((under_another_name.handler)()), Ok(()));

    let reexported = find("billing::reexported");
    assert_eq!(reexported.module_path, ROOT);
    assert_eq!(reexported.missed, MissedPolicy::Skip);
    assert_eq!(
        runtime.block_on((reexported.handler)()),
        Err("disk full".to_owned())
    );

    let absolute = find(&format!("{ROOT}::nested::absolute"));
    assert_eq!(absolute.timezone, Some("Europe/Berlin"));
    assert_eq!(runtime.block_on((absolute.handler)()), Ok(()));

    assert_eq!(inventory::iter::<Registration>.into_iter().count(), 3);
    // The registry the runtime reads lists them.
    assert!(cv::jobs().iter().any(|job| job.name == "billing::reexported"));

    runtime.block_on(async {
        renamed().await;
        nested::absolute().await;
    });
}
