//! Writers for the few SVG elements the drawings use; every piece of text goes through
//! [`xml_escape`].

use std::fmt::Write;

use crate::text::xml_escape;

/// An SVG document being written.
#[derive(Debug, Default)]
pub(crate) struct Svg {
    body: String,
}

/// Text anchoring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Anchor {
    /// Left-aligned at x.
    Start,
    /// Centred on x.
    Middle,
    /// Right-aligned at x.
    End,
}

impl Anchor {
    fn as_str(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

/// Formats a coordinate with at most one decimal.
pub(crate) fn num(v: f64) -> String {
    let v = if v.is_finite() { v } else { 0.0 };
    let r = (v * 10.0).round() / 10.0;
    if r.fract() == 0.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.1}")
    }
}

impl Svg {
    /// An empty document.
    pub(crate) fn new() -> Self {
        Svg::default()
    }

    /// Opens a group with a class and extra (already-escaped) attributes.
    pub(crate) fn open_group(&mut self, class: &str, attrs: &str) {
        let _ = writeln!(self.body, r#"<g class="{}"{attrs}>"#, xml_escape(class));
    }

    /// Closes a group.
    pub(crate) fn close_group(&mut self) {
        self.body.push_str("</g>\n");
    }

    /// A tooltip for the enclosing element.
    pub(crate) fn title(&mut self, text: &str) {
        let _ = writeln!(self.body, "<title>{}</title>", xml_escape(text));
    }

    /// A rectangle.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn rect(
        &mut self,
        x: f64,
        y: f64,
        w: f64,
        h: f64,
        rx: f64,
        fill: &str,
        stroke: &str,
        extra: &str,
    ) {
        let _ = writeln!(
            self.body,
            r#"<rect x="{}" y="{}" width="{}" height="{}" rx="{}" fill="{}" stroke="{}"{extra}/>"#,
            num(x),
            num(y),
            num(w.max(0.0)),
            num(h.max(0.0)),
            num(rx),
            xml_escape(fill),
            xml_escape(stroke)
        );
    }

    /// A line of text.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn text(
        &mut self,
        x: f64,
        y: f64,
        size: f64,
        weight: &str,
        fill: &str,
        anchor: Anchor,
        s: &str,
    ) {
        let _ = writeln!(
            self.body,
            r#"<text x="{}" y="{}" font-size="{}" font-weight="{}" fill="{}" text-anchor="{}">{}</text>"#,
            num(x),
            num(y),
            num(size),
            xml_escape(weight),
            xml_escape(fill),
            anchor.as_str(),
            xml_escape(s)
        );
    }

    /// A straight line.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn line(
        &mut self,
        x1: f64,
        y1: f64,
        x2: f64,
        y2: f64,
        stroke: &str,
        width: f64,
        extra: &str,
    ) {
        let _ = writeln!(
            self.body,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="{}"{extra}/>"#,
            num(x1),
            num(y1),
            num(x2),
            num(y2),
            xml_escape(stroke),
            num(width)
        );
    }

    /// A path with the given `d` (built from numbers only) and stroke.
    pub(crate) fn path(&mut self, d: &str, stroke: &str, width: f64, extra: &str) {
        let _ = writeln!(
            self.body,
            r#"<path d="{}" fill="none" stroke="{}" stroke-width="{}"{extra}/>"#,
            xml_escape(d),
            xml_escape(stroke),
            num(width)
        );
    }

    /// Appends markup that is already well-formed SVG (a whole chart document, say),
    /// unchanged.
    pub(crate) fn raw(&mut self, markup: &str) {
        self.body.push_str(markup);
        if !markup.ends_with('\n') {
            self.body.push('\n');
        }
    }

    /// Wraps the body into a complete document of the given size.
    pub(crate) fn finish(self, width: f64, height: f64, title: &str) -> String {
        let mut out = String::with_capacity(self.body.len() + 512);
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">"#,
            w = num(width),
            h = num(height)
        );
        let _ = writeln!(out, "<title>{}</title>", xml_escape(title));
        let _ = writeln!(
            out,
            r##"<rect x="0" y="0" width="{}" height="{}" fill="#ffffff"/>"##,
            num(width),
            num(height)
        );
        out.push_str(&self.body);
        out.push_str("</svg>\n");
        out
    }
}

/// An attribute string ` name="value"` with the value escaped.
pub(crate) fn attr(name: &str, value: &str) -> String {
    format!(r#" {name}="{}""#, xml_escape(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_compact_and_finite() {
        assert_eq!(num(10.0), "10");
        assert_eq!(num(10.26), "10.3");
        assert_eq!(num(f64::NAN), "0");
    }

    #[test]
    fn text_is_escaped() {
        let mut s = Svg::new();
        s.text(0.0, 0.0, 10.0, "normal", "#000", Anchor::Start, "<a&b>");
        let doc = s.finish(10.0, 10.0, "t\"");
        assert!(doc.contains("&lt;a&amp;b&gt;"));
        assert!(doc.contains("<title>t&quot;</title>"));
    }
}
