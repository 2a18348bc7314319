//! The database's clock (G1, docs/operations.md).

statements! { "clock";
    /// `now()`: the instant the transaction began, the same for every statement in it.
    NOW = "SELECT now()";

    /// `clock_timestamp()`: the database's clock as it answers, which a replica maps its own clock onto.
    CLOCK = "SELECT clock_timestamp()";
}
