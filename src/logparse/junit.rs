//! JUnit XML reports (ours; SWE-bench has no such parser), read with `roxmltree`.

use super::{LogParseError, StatusMap, TestStatus};

/// Every `<testcase>` under the root `<testsuites>` or `<testsuite>` (at any depth, so nested
/// suites are read too). Its id is `CLASSNAME::NAME`, or `NAME` when it has no or an empty
/// `classname`. Its status comes from its child elements: `<failure>` → FAILED, `<error>` →
/// ERROR, `<skipped>` → XFAIL when its `type` is `pytest.xfail`, else SKIPPED; no such child →
/// PASSED. Other children (`<system-out>`, `<properties>`, Surefire's `<rerunFailure>` and
/// `<flakyFailure>`) do not count.
///
/// When a test case has several such children, or several test cases share an id (pytest
/// writes a failed test whose teardown then raised as two), the status is the one pytest's
/// `-rA` summary would print last, which is what SWE-bench's `pytest` parser keeps: FAILED
/// over ERROR over XFAIL over SKIPPED over PASSED.
pub(super) fn parse(xml: &str) -> Result<StatusMap, LogParseError> {
    let doc = roxmltree::Document::parse(xml).map_err(|e| LogParseError::BadJunitXml {
        problem: e.to_string(),
    })?;
    let root = doc.root_element();
    let root_name = root.tag_name().name();
    if root_name != "testsuites" && root_name != "testsuite" {
        return Err(LogParseError::BadJunitXml {
            problem: format!("the root element is <{root_name}>, not <testsuites> or <testsuite>"),
        });
    }
    let mut map = StatusMap::new();
    for case in root
        .descendants()
        .filter(|n| n.is_element() && n.tag_name().name() == "testcase")
    {
        let Some(name) = case.attribute("name") else {
            let pos = doc.text_pos_at(case.range().start);
            return Err(LogParseError::BadJunitXml {
                problem: format!("the <testcase> at {pos} has no `name` attribute"),
            });
        };
        let id = match case.attribute("classname") {
            Some(class) if !class.is_empty() => format!("{class}::{name}"),
            _ => name.to_string(),
        };
        let status = case
            .children()
            .filter(|c| c.is_element())
            .filter_map(|c| match c.tag_name().name() {
                "failure" => Some(TestStatus::Failed),
                "error" => Some(TestStatus::Error),
                "skipped" if c.attribute("type") == Some("pytest.xfail") => Some(TestStatus::Xfail),
                "skipped" => Some(TestStatus::Skipped),
                _ => None,
            })
            .max_by_key(|s| rank(*s))
            .unwrap_or(TestStatus::Passed);
        map.entry(id)
            .and_modify(|s| {
                if rank(status) > rank(*s) {
                    *s = status;
                }
            })
            .or_insert(status);
    }
    Ok(map)
}

/// The order in which pytest's `-rA` summary prints its lines: a later one wins.
fn rank(s: TestStatus) -> u8 {
    match s {
        TestStatus::Passed => 0,
        TestStatus::Skipped => 1,
        TestStatus::Xfail => 2,
        TestStatus::Error => 3,
        TestStatus::Failed => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TestStatus::*;

    #[test]
    fn statuses_and_ids() {
        let xml = r#"<?xml version="1.0"?>
<testsuites><testsuite name="s">
  <testcase classname="pkg.C" name="ok"/>
  <testcase classname="pkg.C" name="f"><failure message="x">trace</failure></testcase>
  <testcase classname="pkg.C" name="e"><error/></testcase>
  <testcase classname="pkg.C" name="s"><skipped/></testcase>
  <testcase classname="pkg.C" name="x"><skipped type="pytest.xfail"/></testcase>
  <testcase classname="" name="bare"><system-out>FAILED</system-out></testcase>
  <testcase classname="pkg.C" name="twice"><failure/></testcase>
  <testcase classname="pkg.C" name="twice"><error/></testcase>
  <testsuite name="nested"><testcase classname="n" name="deep"/></testsuite>
</testsuite></testsuites>"#;
        let map = parse(xml).unwrap();
        let got: Vec<(&str, TestStatus)> = map.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(
            got,
            [
                ("bare", Passed),
                ("n::deep", Passed),
                ("pkg.C::e", Error),
                ("pkg.C::f", Failed),
                ("pkg.C::ok", Passed),
                ("pkg.C::s", Skipped),
                ("pkg.C::twice", Failed),
                ("pkg.C::x", Xfail),
            ]
        );
        // A single suite as the root.
        let map = parse(r#"<testsuite><testcase name="t"/></testsuite>"#).unwrap();
        assert_eq!(map.get("t"), Some(&Passed));
    }

    #[test]
    fn bad_reports_are_named() {
        let err = parse("<testsuites><testcase name='a'></testsuites>").unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("not a readable JUnit XML report: "),
            "{msg}"
        );
        assert!(msg.contains("1:"), "the position is given: {msg}");
        let err = parse("<html/>").unwrap_err().to_string();
        assert!(err.contains("the root element is <html>"), "{err}");
        let err = parse("<testsuite>\n<testcase classname='c'/></testsuite>")
            .unwrap_err()
            .to_string();
        assert!(err.contains("<testcase> at 2:1 has no `name`"), "{err}");
        assert!(parse("").is_err());
        assert!(parse("============ 3 passed ============").is_err());
    }
}
