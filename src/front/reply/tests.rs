//! The size of what every request holds.

use super::*;

/// The size of the future `make` would return; it is never called.
fn future_size<F: Future>(_make: impl FnOnce() -> F) -> usize {
    std::mem::size_of::<F>()
}

/// Every request's future is boxed (`Running::start` and a legacy call's
/// in `front::era::serve` are written into a box made first, `front::Edge`
/// moves its own whole), so its size is paid per request: a rare arm
/// awaited inline (opening a link, listing, Redis) once made it 7.5 KiB
/// in a release build. Boxed where they are awaited, they cost nothing
/// here.
#[test]
#[allow(unreachable_code, clippy::diverging_sub_expression)]
fn a_request_future_stays_small() {
    // 2,352 and 896 bytes now (a debug build); `run` was 2,256 before
    // the operation histograms (the router's `Seen`, a backend call's
    // series and start: callgrind counts all of it in their +440
    // instructions a call); an earlier count read 1,920. It was 2,936
    // while a call's deadline held its future three times over
    // (`timers::Timeout`, `upstream::deadline`), 1,944 while it built
    // its caller; `post_mcp` 2,744 while it and `mcp` were `async fn`
    // layers over `post::handle`, and 1,936 while it took a `Request`
    // (`front::headers::Head` instead), 1,840 before it took the
    // namespace's name, 1,896 while `post::answer` was an `async fn`
    // over `handle`, 1,848 while the common legacy call's future was
    // held inline (boxed now: `front::era::serve`).
    let run = future_size(|| run(todo!(), todo!(), todo!(), todo!(), todo!(), todo!()));
    assert!(run <= 2 * 1024 + 320, "reply::run: {run} bytes");
    // What a connection holds while a POST runs (`front::conn`).
    let post = future_size(|| {
        let edge = super::super::Edge::post_mcp;
        edge(
            todo!(),
            todo!(),
            todo!(),
            todo!(),
            todo!(),
            todo!(),
            todo!(),
        )
    });
    assert!(post <= 2 * 1024, "Edge::post_mcp: {post} bytes");
}
