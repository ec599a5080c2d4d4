//! Answers that need the database and the explainer together: the sides of a comparison or an
//! invalidation report loaded through `db` and handed to the pure `explain` functions
//! ([`load`]), and reports computed once and stored ([`stored`]). The one layer above both: the
//! explainer stays pure over [`crate::explain::Side`] values.

pub mod load;
pub mod stored;
