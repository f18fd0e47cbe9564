mod common;
use common::*;

#[test]
fn pack_then_verify_roundtrip() {
    let t = TestContext::new();
    let cb = t.path("cb");
    make_fixture_codebase(&cb);
    let id = t.pack(&cb);
    assert_eq!(id.len(), 64);
    t.run_expect(&["verify"], 0);
}
