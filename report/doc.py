"""A tiny document model rendered both as Markdown and as one self-contained HTML page
(images embedded as base64), so report.md and report.html always say the same thing."""
import base64
import html
import os
import re

CSS = """
body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;max-width:1180px;margin:24px auto;
padding:0 18px;color:#1d1d1f;line-height:1.45;background:#fff}
h1{font-size:26px;border-bottom:2px solid #1f77b4;padding-bottom:6px}
h2{font-size:20px;margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:16px;margin-top:20px}
.tw{overflow-x:auto;margin:10px 0}
table{border-collapse:collapse;font-size:12.5px}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right;vertical-align:top}
td{white-space:nowrap}
th{background:#f0f4f8}
td:first-child,th:first-child{text-align:left}
td.l{text-align:left}
td.w{white-space:normal;min-width:320px}
img{max-width:100%;border:1px solid #e4e4e4;margin:8px 0}
.note{background:#fff8e1;border-left:4px solid #f0ad4e;padding:6px 10px;margin:10px 0}
.bad{background:#fdecea;border-left:4px solid #d62728;padding:6px 10px;margin:10px 0}
.answer{background:#eef6ee;border-left:4px solid #2ca02c;padding:6px 10px;margin:10px 0}
code{background:#f4f4f4;padding:0 3px;border-radius:3px;font-size:90%}
figcaption{font-size:12px;color:#555}
"""


class Doc:
    def __init__(self, title):
        self.title = title
        self.blocks = []

    def h(self, level, text):
        self.blocks.append(("h", level, text))

    def p(self, text, kind=None):
        """A paragraph; kind in (None, 'note', 'bad', 'answer') styles it in HTML."""
        self.blocks.append(("p", text, kind))

    def bullets(self, items):
        self.blocks.append(("ul", list(items)))

    def table(self, header, rows, left=1):
        self.blocks.append(("table", list(header), [list(r) for r in rows], left))

    def image(self, path, rel, caption, mime="image/png"):
        self.blocks.append(("img", path, rel, caption, mime))

    # -- Markdown --------------------------------------------------------------------------
    def markdown(self):
        out = [f"# {self.title}", ""]
        for b in self.blocks:
            kind = b[0]
            if kind == "h":
                out += ["#" * (b[1] + 1) + " " + b[2], ""]
            elif kind == "p":
                prefix = {"note": "> **Note:** ", "bad": "> **Warning:** ",
                          "answer": "> "}.get(b[2], "")
                out += [prefix + b[1], ""]
            elif kind == "ul":
                out += [f"- {i}" for i in b[1]] + [""]
            elif kind == "table":
                header, rows = b[1], b[2]
                out.append("| " + " | ".join(_md_cell(c) for c in header) + " |")
                out.append("|" + "|".join("---" if i < b[3] else "---:"
                                          for i in range(len(header))) + "|")
                for r in rows:
                    out.append("| " + " | ".join(_md_cell(c) for c in r) + " |")
                out.append("")
            elif kind == "img":
                out += [f"![{b[3]}]({b[2]})", "", f"*{b[3]}*", ""]
        return "\n".join(out).rstrip() + "\n"

    # -- HTML ------------------------------------------------------------------------------
    def html(self):
        parts = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
                 f"<title>{html.escape(self.title)}</title>",
                 "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
                 f"<style>{CSS}</style></head><body>", f"<h1>{html.escape(self.title)}</h1>"]
        for b in self.blocks:
            kind = b[0]
            if kind == "h":
                lvl = min(b[1] + 1, 6)
                parts.append(f"<h{lvl}>{_inline(b[2])}</h{lvl}>")
            elif kind == "p":
                cls = f" class=\"{b[2]}\"" if b[2] else ""
                parts.append(f"<p{cls}>{_inline(b[1])}</p>")
            elif kind == "ul":
                parts.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b[1]) + "</ul>")
            elif kind == "table":
                header, rows, left = b[1], b[2], b[3]
                h = "".join(f"<th>{_inline(str(c))}</th>" for c in header)
                body = []
                for r in rows:
                    cells = "".join(
                        f"<td{_td_class(i < left, str(c))}>{_inline(str(c))}</td>"
                        for i, c in enumerate(r))
                    body.append(f"<tr>{cells}</tr>")
                parts.append(f"<div class=\"tw\"><table><thead><tr>{h}</tr></thead><tbody>"
                             f"{''.join(body)}</tbody></table></div>")
            elif kind == "img":
                path, rel, caption, mime = b[1], b[2], b[3], b[4]
                try:
                    with open(path, "rb") as f:
                        data = base64.b64encode(f.read()).decode()
                    src = f"data:{mime};base64,{data}"
                except OSError:
                    src = html.escape(rel)
                parts.append(f"<figure><img src=\"{src}\" alt=\"{html.escape(caption)}\">"
                             f"<figcaption>{_inline(caption)} — <a href=\"{html.escape(rel)}\">"
                             f"{html.escape(os.path.basename(rel))}</a></figcaption></figure>")
        parts.append("</body></html>")
        return "\n".join(parts) + "\n"


def _td_class(left, text):
    cls = (["l"] if left else []) + (["w"] if len(text) > 50 else [])
    return f" class=\"{' '.join(cls)}\"" if cls else ""


def _md_cell(c):
    return str(c).replace("|", "\\|").replace("\n", " ")


_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def _inline(text):
    """The little Markdown used in the report (`code`, **bold**, [link](href)) as HTML."""
    t = html.escape(str(text), quote=False)
    t = _CODE.sub(lambda m: f"<code>{m.group(1)}</code>", t)
    t = _BOLD.sub(lambda m: f"<b>{m.group(1)}</b>", t)
    t = _LINK.sub(lambda m: f"<a href=\"{m.group(2)}\">{m.group(1)}</a>", t)
    return t
