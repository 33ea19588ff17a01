//! A POST on its way to its era.

use std::sync::Arc;

use tokio::time::Instant;

use crate::auth::Identity;
use crate::front::headers::RequestHeaders;
use crate::front::limits::Admitted;
use crate::front::{Front, Layout};
use crate::router::Namespace;

/// A POST that passed the checks both eras share (`post`): under which
/// layout, to which namespace, from whom, and its headers (slices of the
/// connection's read buffer: each era drops them as soon as it can).
pub(in crate::front) struct Posted<'a> {
    pub(in crate::front) front: &'a Arc<Front>,
    pub(in crate::front) layout: &'a Layout,
    pub(in crate::front) ns: Arc<Namespace>,
    pub(in crate::front) headers: RequestHeaders,
    pub(in crate::front) who: Identity,
    pub(in crate::front) admitted: Admitted,
    pub(in crate::front) started: Instant,
}
