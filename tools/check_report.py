"""Open a report.html in headless Chromium and check what a reader would see.

    python -m tools.check_report REPORT.html [--screenshot OUT.png] [--width 1280] [--chromium PATH]

Problems (exit status 1, one line each): an image that did not load (naturalWidth 0) or is not displayed, an
image shown wider than its container, a page wider than the window (sideways scrolling), a figure without a
visible caption. Warnings (listed, exit status 0): an image shrunk to less than half its width (its text may be
hard to read), a table that scrolls sideways inside its box. Exit status 2: the check could not run (no such
file, no Chromium, Chromium failed).

How: a temporary copy of the page gets a small script that measures the laid-out page once everything has
loaded and replaces the page with its findings as JSON, which `--dump-dom` prints; `--virtual-time-budget`
lets the page load without waiting in real time. No Python dependency beyond the standard library. Chromium is
started with a fresh profile and without its background services, which would try to reach Google's servers.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT_CHROMIUM = "/usr/bin/chromium"
WINDOW_HEIGHT = 900
MAX_SCREENSHOT_HEIGHT = 16384  # Chromium draws no larger surface; a longer page shows its top part
RESULT_ID = "metaxlm-report-check"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--disable-extensions", "--mute-audio"]

# Runs in the page once it has loaded (images decoded), measures, then replaces the page by the findings.
CHECK_SCRIPT = r"""
(() => {
  const px = (value) => Math.round(value);
  const describe = (img, index) => {
    const caption = img.closest("figure")?.querySelector("figcaption")?.innerText.trim();
    return `image ${index + 1} (${caption || img.alt || img.src.slice(0, 40)})`;
  };
  const visible = (el) => {
    const style = getComputedStyle(el), box = el.getBoundingClientRect();
    return box.width > 0 && box.height > 0 && style.visibility !== "hidden" && style.display !== "none"
      && Number(style.opacity) > 0;
  };
  const check = () => {
    const problems = [], warnings = [];
    const root = document.documentElement, window_width = root.clientWidth;
    const images = [...document.images];
    images.forEach((img, i) => {
      const name = describe(img, i), box = img.getBoundingClientRect(), container = img.parentElement;
      if (!img.complete || img.naturalWidth === 0) { problems.push(`${name}: did not load`); return; }
      if (!visible(img)) { problems.push(`${name}: not displayed`); return; }
      const room = container.getBoundingClientRect();
      if (box.width > container.clientWidth + 0.5 || box.right > room.right + 0.5 || box.left < room.left - 0.5)
        problems.push(`${name}: shown ${px(box.width)} px wide in a ${px(container.clientWidth)} px container`);
      if (box.width < 0.5 * img.naturalWidth)
        warnings.push(`${name}: shrunk to ${px(100 * box.width / img.naturalWidth)} % of its ` +
                      `${img.naturalWidth} px width; its text may be hard to read`);
    });
    if (root.scrollWidth > window_width + 0.5) {
      const wide = [...document.body.querySelectorAll("*")]
        .filter((el) => el.getBoundingClientRect().right > window_width + 0.5)
        .filter((el) => !el.parentElement || el.parentElement.getBoundingClientRect().right <= window_width + 0.5)
        .slice(0, 5).map((el) => `<${el.tagName.toLowerCase()}> "${(el.innerText || el.alt || "").trim().slice(0, 40)}"`);
      problems.push(`the page is ${root.scrollWidth} px wide in a ${window_width} px window (scrolls sideways)` +
                    (wide.length ? `; too wide: ${wide.join(", ")}` : ""));
    }
    const figures = [...document.querySelectorAll("figure")];
    figures.forEach((figure, i) => {
      const caption = figure.querySelector("figcaption"), img = figure.querySelector("img");
      const name = `figure ${i + 1}` + (img && img.alt ? ` (${img.alt})` : "");
      if (!caption || !caption.innerText.trim()) problems.push(`${name}: no caption`);
      else if (!visible(caption)) problems.push(`${name}: its caption is not visible`);
    });
    document.querySelectorAll("table").forEach((table) => {
      const box = table.parentElement;
      const head = table.rows[0]?.innerText.replace(/\s+/g, " ").trim().slice(0, 40);
      if (box.scrollWidth > box.clientWidth + 0.5)
        warnings.push(`a table (${head}…) scrolls sideways: ${box.scrollWidth} px in ${box.clientWidth} px`);
    });
    const findings = {problems, warnings, images: images.length, figures: figures.length,
                      width: window_width, height: root.scrollHeight};
    document.body.innerHTML = "";
    const out = document.createElement("pre");
    out.id = "RESULT_ID";
    out.textContent = JSON.stringify(findings);
    document.body.appendChild(out);
  };
  if (document.readyState === "complete") check(); else window.addEventListener("load", check);
})();
""".replace("RESULT_ID", RESULT_ID)  # noqa: E501 (the page script, kept byte-identical)


class CheckError(Exception):
    """The check could not run (as opposed to problems found in the report)."""


def find_chromium(path: str | None = None) -> Path:
    """The Chromium binary: `path`, else /usr/bin/chromium, else `chromium` on PATH."""
    candidate = path or (DEFAULT_CHROMIUM if Path(DEFAULT_CHROMIUM).exists() else shutil.which("chromium"))
    if not candidate or not Path(candidate).exists():
        raise CheckError(f"no Chromium at {path or DEFAULT_CHROMIUM}: install it (`apt-get install chromium`, "
                         "which `make check-report` does) or pass --chromium PATH")
    return Path(candidate)


def _run_chromium(chromium: Path, profile: Path, args: list[str], timeout: float) -> str:
    """Chromium's standard output. It runs in its own process group, so that on a timeout the browser goes
    together with the renderer processes it started."""
    command = [str(chromium), *FLAGS, f"--user-data-dir={profile}", *args]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as browser:
        try:
            out, err = browser.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(browser.pid, signal.SIGKILL)
            browser.communicate()
            raise CheckError(f"Chromium did not finish within {timeout:.0f} s: {' '.join(command)}") from None
    if browser.returncode != 0:
        tail = "\n".join(err.strip().splitlines()[-5:])
        raise CheckError(f"Chromium failed (exit status {browser.returncode}): {tail}")
    return out


def _with_check_script(page: str) -> str:
    script = f"<script>{CHECK_SCRIPT}</script>"
    closing = page.lower().rfind("</body>")
    return page[:closing] + script + page[closing:] if closing >= 0 else page + script


def check_report(report: Path, *, screenshot: Path | None = None, width: int = 1280,
                 chromium: str | None = None, timeout: float = 300.0) -> dict:
    """Lay the report out in a `width` px wide window; {"problems", "warnings", "images", "figures", "width",
    "height", "screenshot"} (the screenshot's path and whether the page was taller than it)."""
    report = Path(report)
    if not report.is_file():
        raise CheckError(f"{report}: no such file")
    try:
        page = report.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise CheckError(f"{report}: cannot read it as UTF-8 text: {err}") from None
    binary = find_chromium(chromium)
    with tempfile.TemporaryDirectory(prefix="check-report-") as tmp:
        copy = Path(tmp) / "page.html"  # alone is enough: the report is self-contained (figures inline)
        copy.write_text(_with_check_script(page), encoding="utf-8")
        dom = _run_chromium(binary, Path(tmp) / "profile", [f"--window-size={width},{WINDOW_HEIGHT}",
                                                             "--virtual-time-budget=20000", "--dump-dom",
                                                             copy.as_uri()], timeout)
        found = re.search(rf'<pre id="{RESULT_ID}">(.*?)</pre>', dom, re.DOTALL)
        if not found:
            raise CheckError(f"{report}: the check script gave no result (does the page load? Chromium printed "
                             f"{len(dom)} characters)")
        findings = json.loads(html.unescape(found.group(1)))
        findings["screenshot"] = None
        if screenshot is not None:
            height = min(findings["height"], MAX_SCREENSHOT_HEIGHT)
            screenshot = Path(screenshot).resolve()
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            screenshot.unlink(missing_ok=True)  # so that an old one cannot pass for the new
            _run_chromium(binary, Path(tmp) / "profile", [f"--window-size={width},{height}",
                                                          "--virtual-time-budget=20000", f"--screenshot={screenshot}",
                                                          report.resolve().as_uri()], timeout)
            if not screenshot.is_file():
                raise CheckError(f"Chromium wrote no screenshot to {screenshot}")
            findings["screenshot"] = {"path": str(screenshot), "cut": findings["height"] > height}
    return findings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.check_report",
                                     description="Check a report.html in headless Chromium: images load and fit, "
                                                 "no sideways scrolling, every figure has a visible caption.")
    parser.add_argument("report", type=Path, help="the report's HTML file")
    parser.add_argument("--screenshot", type=Path, help="also save a full-page screenshot (PNG) here")
    parser.add_argument("--width", type=int, default=1280, help="window width in pixels (default: 1280)")
    parser.add_argument("--chromium", help=f"the Chromium binary (default: {DEFAULT_CHROMIUM})")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per Chromium run (default: 300)")
    args = parser.parse_args(argv)
    try:
        findings = check_report(args.report, screenshot=args.screenshot, width=args.width, chromium=args.chromium,
                                timeout=args.timeout)
    except CheckError as err:
        print(f"check_report: error: {err}", file=sys.stderr)
        return 2
    summary = (f"{args.report}: {findings['images']} images, {findings['figures']} figures, page "
               f"{findings['width']}x{findings['height']} px")
    shot = findings["screenshot"]
    if shot:
        summary += f"; screenshot: {shot['path']}" + (f" (the top {MAX_SCREENSHOT_HEIGHT} px)" if shot["cut"] else "")
    print(summary)
    for warning in findings["warnings"]:
        print(f"  warning: {warning}")
    if findings["problems"]:
        print(f"{len(findings['problems'])} problem(s):")
        for problem in findings["problems"]:
            print(f"  - {problem}")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
