//! SWE-bench's prompt, style 3 (the `text` column of SWE-bench_bm25_13K/27K/40K/50K and
//! SWE-bench_oracle), reproduced from `swebench/inference/make_datasets/create_instance.py`:
//! the premise, the issue, the README files and the chosen files with numbered lines, an
//! example patch, and the closing instruction. Every string below must stay byte for byte as
//! upstream has it.

use std::collections::BTreeMap;

const PREMISE: &str = "You will be provided with a partial code base and an issue statement \
                       explaining a problem to resolve.";

const EXAMPLE_EXPLANATION: &str = "Here is an example of a patch file. It consists of changes \
                                   to the code base. It specifies the file names, the line \
                                   numbers of each change, and the removed and added lines. A \
                                   single patch file can contain changes to multiple files.";

const FINAL_INSTRUCTION: &str = "I need you to solve the provided issue by generating a single \
                                 patch file that I can apply directly to this repository using \
                                 git apply. Please respond with a single patch file in the \
                                 format shown above.";

/// The example patch the model is shown (`PATCH_EXAMPLE`).
const PATCH_EXAMPLE: &str = r"--- a/file.py
+++ b/file.py
@@ -1,27 +1,35 @@
 def euclidean(a, b):
-    while b:
-        a, b = b, a % b
-    return a
+    if b == 0:
+        return a
+    return euclidean(b, a % b)
 
 
 def bresenham(x0, y0, x1, y1):
     points = []
     dx = abs(x1 - x0)
     dy = abs(y1 - y0)
-    sx = 1 if x0 < x1 else -1
-    sy = 1 if y0 < y1 else -1
-    err = dx - dy
+    x, y = x0, y0
+    sx = -1 if x0 > x1 else 1
+    sy = -1 if y0 > y1 else 1
 
-    while True:
-        points.append((x0, y0))
-        if x0 == x1 and y0 == y1:
-            break
-        e2 = 2 * err
-        if e2 > -dy:
+    if dx > dy:
+        err = dx / 2.0
+        while x != x1:
+            points.append((x, y))
             err -= dy
-            x0 += sx
-        if e2 < dx:
-            err += dx
-            y0 += sy
+            if err < 0:
+                y += sy
+                err += dx
+            x += sx
+    else:
+        err = dy / 2.0
+        while y != y1:
+            points.append((x, y))
+            err -= dx
+            if err < 0:
+                x += sx
+                err += dy
+            y += sy
 
+    points.append((x, y))
     return points";

/// `content` with each line numbered from 1 (`add_lines`): a file that ends with a newline
/// gets a last, empty, numbered line, as upstream splits on `\n`.
fn numbered(content: &str, out: &mut String) {
    for (i, line) in content.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&(i + 1).to_string());
        out.push(' ');
        out.push_str(line);
    }
}

/// Files as `[start of PATH]`, numbered lines, `[end of PATH]`, in path order
/// (`make_code_text`).
pub fn code_text(files: &BTreeMap<String, String>) -> String {
    let mut all = String::new();
    for (path, content) in files {
        all.push_str("[start of ");
        all.push_str(path);
        all.push_str("]\n");
        numbered(content, &mut all);
        all.push_str("\n[end of ");
        all.push_str(path);
        all.push_str("]\n");
    }
    all.trim_matches('\n').to_string()
}

/// One file as [`code_text`] shows it: what the budget counts per file.
pub fn file_text(path: &str, content: &str) -> String {
    let mut one = BTreeMap::new();
    one.insert(path.to_string(), content.to_string());
    code_text(&one)
}

/// The prompt (`prompt_style_3`).
pub fn style3(
    problem_statement: &str,
    readmes: &BTreeMap<String, String>,
    files: &BTreeMap<String, String>,
) -> String {
    let readmes_text = code_text(readmes);
    let code = code_text(files);
    [
        PREMISE,
        "<issue>",
        problem_statement,
        "</issue>",
        "",
        "<code>",
        &readmes_text,
        &code,
        "</code>",
        "",
        EXAMPLE_EXPLANATION,
        "<patch>",
        PATCH_EXAMPLE,
        "</patch>",
        "",
        FINAL_INSTRUCTION,
        "Respond below:",
    ]
    .join("\n")
}

/// What Python's `str.strip()` strips: Unicode white space and the four separators
/// U+001C–U+001F.
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// The dataset's `text`: the prompt stripped and ended with a blank line
/// (`create_text_dataset.extract_fields`).
pub fn dataset_text(prompt: &str) -> String {
    let mut text = prompt.trim_matches(py_space).to_string();
    text.push_str("\n\n");
    text
}

/// The dataset's `patch`: the gold patch between `<patch>` tags.
pub fn dataset_patch(patch: &str) -> String {
    format!("<patch>\n{patch}\n</patch>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_numbered_as_upstream_numbers_them() {
        let mut files = BTreeMap::new();
        files.insert("b.py".to_string(), "x = 1\n".to_string());
        files.insert("a.py".to_string(), "def f():\n    pass".to_string());
        assert_eq!(
            code_text(&files),
            "[start of a.py]\n1 def f():\n2     pass\n[end of a.py]\n\
             [start of b.py]\n1 x = 1\n2 \n[end of b.py]"
        );
        assert_eq!(code_text(&BTreeMap::new()), "");
    }
}
