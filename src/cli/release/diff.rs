//! `release diff`: why two releases differ, printed.

use std::process::ExitCode;

use crate::release::{self, Snapshot};
use crate::store::Ark;

use super::super::Context;
use super::DiffArgs;

pub(super) fn diff(ctx: &Context, args: DiffArgs) -> anyhow::Result<ExitCode> {
    let a = Snapshot::read(&args.a)?;
    let b = Snapshot::read(&args.b)?;
    let arks = release::ops::open_arks(&ctx.ark, &args.other_ark)?;
    let refs: Vec<&Ark> = arks.iter().collect();
    let d = release::diff(&a, &b, &refs);
    if args.json {
        out!("{}", serde_json::to_string_pretty(&d)?);
    } else {
        for id in &d.only_in_a {
            out!("only in A  {id}");
        }
        for id in &d.only_in_b {
            out!("only in B  {id}");
        }
        for c in &d.changed {
            if c.bundle_a == c.bundle_b {
                out!(
                    "differs    {}: the same bundle {}",
                    c.instance_id,
                    c.bundle_a.short()
                );
            } else {
                out!(
                    "differs    {}: bundle {} → {}",
                    c.instance_id,
                    c.bundle_a.short(),
                    c.bundle_b.short()
                );
            }
            for m in &c.members {
                let how = match m.change {
                    release::Change::Added => "only in B",
                    release::Change::Removed => "only in A",
                    release::Change::Changed => "differs",
                };
                out!("    {} {how}", m.member);
                for detail in &m.details {
                    out!("        {detail}");
                }
            }
            if let Some(why) = &c.unread {
                out!("    members not compared: {why}");
            }
            for (label, objects) in [
                ("object only in A", &c.objects_only_in_a),
                ("object only in B", &c.objects_only_in_b),
            ] {
                for o in objects {
                    out!(
                        "    {label}: {} {}",
                        o.sha256.short(),
                        o.name.as_deref().unwrap_or("(named by neither lock)")
                    );
                }
            }
        }
        ctx.note(format!(
            "release {} (root {}) and {} (root {}): {}; {} instance(s) the same, {} differ, {} \
             only in A, {} only in B",
            d.a.name,
            d.a.root.short(),
            d.b.name,
            d.b.root.short(),
            if d.is_empty() {
                "the same release"
            } else {
                "they differ"
            },
            d.same,
            d.changed.len(),
            d.only_in_a.len(),
            d.only_in_b.len()
        ));
    }
    Ok(if d.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
