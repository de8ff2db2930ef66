#!/usr/bin/env python3
"""The HTML timeline's interactions, in a real headless Chromium (Debian's chromium package).

usage: timeline_test.py GMSHIM FIXTURE_DIR OUT_DIR

Writes `gmshim timeline --html` pages of the shipped fixtures, opens each in Chromium over the
DevTools protocol (cdp.py) and checks what a person would do with it: the chart, legend and
markers are there and the title clears the legend; hovering the chart names the top live call
sites; an OOM marker takes the mouse (nothing covers it) and shows its cause on hover and on
click; the wheel and the buttons zoom, a drag pans, a double click shows the whole run;
thousands of marks are a band until zoomed in; the flame graph answers hover and click; a
screenshot has the chart's colours. Expected values come from the page's own data, never from
constants here. Without Chromium it prints one line saying so and exits 0.
"""
import json
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cdp  # noqa: E402

FIXTURES = ("demo.gmlog", "h200_torch_leak_oom.gmlog", "h200_cupti_static_inject.gmlog")
MAX_PAGE = 256 * 1024
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)
    return ok


def page_data(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r'<script type="application/json" id="gmdata">(.*?)</script>', text, re.S)
    return json.loads(m.group(1)), len(text.encode())


def rect(b, selector, index=0):
    return b.js("(function(){var e=document.querySelectorAll(%s)[%d];if(!e)return null;var r=e.getBoundingClientRect();"
                "return {x:r.left,y:r.top,w:r.width,h:r.height};})()" % (json.dumps(selector), index))


def tip(b):
    return b.js("document.getElementById('tip').style.display==='block'?document.getElementById('tip').textContent:''")


def plot_x(p, bb, t):
    return bb["x"] + bb["w"] * t / p["tmax"]


def check_structure(b, name, log, p):
    n_res = b.js("document.querySelectorAll('#panel-0 path.res').length")
    n_alloc = b.js("document.querySelectorAll('#panel-0 path.alloc').length")
    check(n_res == 1 and n_alloc == 1, "%s: the chart draws reserved and allocated (%s, %s paths)" % (name, n_res, n_alloc))
    keys = b.js("Array.from(document.querySelectorAll('#panel-0 .legend .key')).map(function(k){return k.dataset.series})")
    want = ["reserved", "allocated"] + (["outside"] if "o" in p else []) + (["cap"] if p["cap"] else []) + \
        (["marks"] if log["marks"] else []) + (["ooms"] if p["ooms"] else [])
    check(keys == want, "%s: a legend entry for every series: %s (expected %s)" % (name, keys, want))
    if "o" in p:
        check(b.js("document.querySelectorAll('#panel-0 path.outside').length") == 1,
              "%s: memory outside the pool is drawn" % name)
        legend = b.js("document.querySelector('#panel-0 .key[data-series=outside]').textContent")
        check(all(lib in legend for lib in p["libs"]), "%s: the legend names the libraries %s: %r" % (name, p["libs"], legend))
    t, l = rect(b, "#panel-0 .ptitle"), rect(b, "#panel-0 .legend")
    check(t["y"] + t["h"] <= l["y"] + 0.5, "%s: the title (bottom %.1f) clears the legend (top %.1f)" % (name, t["y"] + t["h"], l["y"]))
    check(b.js("document.querySelectorAll('#panel-0 g.oom').length") == len(p["ooms"]),
          "%s: one marker per OOM (%d)" % (name, len(p["ooms"])))


def check_hover(b, name, log, p):
    bb = rect(b, "#panel-0 rect.hover")
    entry = next((e for e in reversed(p["top"]) if len(e) > 1), None)
    if not entry:
        return
    t = (entry[0] + 0.5) * p["tmax"] / len(p["a"])
    x, y = plot_x(p, bb, t), bb["y"] + bb["h"] * 0.6
    b.mouse("mouseMoved", x, y)
    text = tip(b)
    label = log["sites"][str(entry[1])]
    check("top live call sites" in text and label in text,
          "%s: hovering at bucket %d names the top site %r: %r" % (name, entry[0], label, text[:160]))


def check_oom(b, name, p):
    if not p["ooms"]:
        return
    o = p["ooms"][0]
    c = rect(b, "#panel-0 g.oom circle")
    cx, cy = c["x"] + c["w"] / 2, c["y"] + c["h"] / 2
    on_top = b.js("!!document.elementFromPoint(%f,%f).closest('g.oom')" % (cx, cy))
    check(on_top, "%s: the OOM marker is the element under the mouse, not a layer over it" % name)
    b.mouse("mouseMoved", cx, cy)
    text = tip(b)
    check("cause: " + o["cause"] in text and o["why"][:40] in text,
          "%s: hovering the OOM shows its cause and evidence: %r" % (name, text[:160]))
    b.click(cx, cy)
    detail = b.js("(function(){var d=document.querySelector('#panel-0 .oomdetail');return d.hidden?'':d.textContent})()")
    check(o["cause"] in detail and o["why"][:40] in detail, "%s: clicking the OOM keeps its details: %r" % (name, detail[:120]))
    sel = b.js("(function(){var s=document.querySelector('#panel-0 .flamesel');return s?s.options[s.selectedIndex].text:''})()")
    check(sel.startswith("OOM 1"), "%s: clicking the OOM shows the flame graph at it: %r" % (name, sel))


def view_range(b):
    return b.js("document.querySelector('#panel-0 .range').textContent")


def check_zoom(b, name, p):
    bb = rect(b, "#panel-0 rect.hover")
    cx, cy = bb["x"] + bb["w"] / 2, bb["y"] + bb["h"] / 2
    whole = view_range(b)
    ticks0 = b.js("Array.from(document.querySelectorAll('#panel-0 .xtick')).map(function(e){return e.textContent})")
    for _ in range(4):
        b.mouse("mouseWheel", cx, cy, delta_y=-120)
    zoomed = view_range(b)
    ticks1 = b.js("Array.from(document.querySelectorAll('#panel-0 .xtick')).map(function(e){return e.textContent})")
    check("zoomed" in zoomed and ticks1 != ticks0, "%s: the wheel zooms in: %r -> %r" % (name, whole, zoomed))
    b.mouse("mouseMoved", cx, cy)
    b.mouse("mousePressed", cx, cy, "left", 1)
    b.mouse("mouseMoved", cx - 150, cy, "left")
    b.mouse("mouseReleased", cx - 150, cy, "left", 1)
    panned = view_range(b)
    check(panned != zoomed and "zoomed" in panned, "%s: a drag pans: %r -> %r" % (name, zoomed, panned))
    b.mouse("mousePressed", cx, cy, "left", 2)
    b.mouse("mouseReleased", cx, cy, "left", 2)
    b.js("document.querySelector('#panel-0 rect.hover').dispatchEvent(new MouseEvent('dblclick',{bubbles:true}))")
    check(view_range(b) == whole, "%s: a double click shows the whole run again: %r" % (name, view_range(b)))
    z = rect(b, "#panel-0 button.zin")
    b.click(z["x"] + z["w"] / 2, z["y"] + z["h"] / 2)
    check("zoomed 2.0" in view_range(b), "%s: the + button zooms in twice: %r" % (name, view_range(b)))
    r = rect(b, "#panel-0 button.zreset")
    b.click(r["x"] + r["w"] / 2, r["y"] + r["h"] / 2)
    check(view_range(b) == whole, "%s: 'whole run' resets the view" % name)


def check_marks(b, name, log, p):
    if not log["marks"]:
        return
    lines = b.js("document.querySelectorAll('#panel-0 line.mark').length")
    band = b.js("document.querySelectorAll('#panel-0 .markband').length")
    if len(log["marks"]) > 200:
        check(band == 1 and lines == 0, "%s: %d marks are drawn as a band, not stripes (%d lines)" % (name, len(log["marks"]), lines))
        z = rect(b, "#panel-0 button.zin")
        for _ in range(7):
            b.click(z["x"] + z["w"] / 2, z["y"] + z["h"] / 2)
        lines = b.js("document.querySelectorAll('#panel-0 line.mark').length")
        check(0 < lines <= 200, "%s: zoomed in, the marks there are lines again (%d)" % (name, lines))
        r = rect(b, "#panel-0 button.zreset")
        b.click(r["x"] + r["w"] / 2, r["y"] + r["h"] / 2)
    else:
        check(lines == len(log["marks"]) and band == 0, "%s: each of %d marks is a line (%d)" % (name, len(log["marks"]), lines))


def check_flame(b, name, p):
    if not p["flames"]:
        return
    b.js("(function(){var s=document.querySelector('#panel-0 .flamesel');s.value=0;s.dispatchEvent(new Event('change'))})()")
    nodes = b.js("document.querySelectorAll('#panel-0 .fnode').length")
    check(nodes == len(p["flames"][0]["nodes"]) or nodes > 1,
          "%s: the flame graph at %r draws its call sites (%d nodes)" % (name, p["flames"][0]["label"], nodes))
    deepest = b.js("(function(){var a=Array.from(document.querySelectorAll('#panel-0 .fnode'));"
                   "return a.reduce(function(m,e,i){return parseFloat(e.style.top)>parseFloat(a[m].style.top)?i:m},0)})()")
    n = rect(b, "#panel-0 .fnode", 1)
    b.mouse("mouseMoved", n["x"] + min(n["w"] / 2, 20), n["y"] + n["h"] / 2)
    check("% of all live bytes" in tip(b), "%s: hovering a flame node gives its bytes: %r" % (name, tip(b)[:100]))
    b.click(n["x"] + min(n["w"] / 2, 20), n["y"] + n["h"] / 2)
    root = b.js("document.querySelector('#panel-0 .froot').dataset.node")
    check(root == "1", "%s: clicking a flame node zooms to it (root now %s; deepest was %s)" % (name, root, deepest))


def check_screenshot(b, name, out):
    png = b.screenshot()
    open(os.path.join(out, name + ".png"), "wb").write(png)
    w, h, rows = cdp.png_pixels(png)
    bb = rect(b, "#panel-0 svg.chart")
    # the allocated area (#f6c28b at 85 % over the reserved one), a series' line, the OOM red
    want = {"allocated fill": (240, 199, 155), "allocated line": (224, 123, 0), "reserved line": (74, 144, 217),
            "outside line": (46, 158, 68), "OOM red": (221, 0, 0)}
    seen = dict.fromkeys(want, 0)
    for y in range(int(bb["y"]), min(h, int(bb["y"] + bb["h"]))):
        for x in range(int(bb["x"]), min(w, int(bb["x"] + bb["w"]))):
            px = rows[y][x]
            for k, c in want.items():
                if all(abs(px[i] - c[i]) <= 24 for i in range(3)):
                    seen[k] += 1
    return seen


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    gmshim, fixtures, out = sys.argv[1:]
    binary = cdp.find_chromium()
    if not binary:
        print("browser test skipped: chromium is not installed (apt-get install chromium; scripts/install-deps does it)")
        return 0
    os.makedirs(out, exist_ok=True)
    pages = []
    for f in FIXTURES:
        html = os.path.join(out, f.replace(".gmlog", ".html"))
        subprocess.run([gmshim, "timeline", "--html", html, os.path.join(fixtures, f)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pages.append((f.replace(".gmlog", ""), html))
    b = cdp.Browser(binary)
    try:
        for name, html in pages:
            data, size = page_data(html)
            check(size <= MAX_PAGE, "%s: the page is small: %d bytes" % (name, size))
            b.open(html)
            check(not b.exceptions(), "%s: the script runs without errors %s" % (name, b.exceptions()[:1]))
            log = data["logs"][0]
            p = log["panels"][0]
            check_structure(b, name, log, p)
            seen = check_screenshot(b, name, out)
            lines = seen["allocated line"] + seen["reserved line"] + seen["outside line"]
            filled = sum(1 for v in p["a"] if v > p["vtop"] / 50) >= len(p["a"]) / 20  # a visible area to look for
            check((seen["allocated fill"] > 500 or not filled) and lines > 50 and (seen["OOM red"] > 20 or not p["ooms"]) and
                  (seen["outside line"] > 50 or "o" not in p), "%s: the screenshot shows the chart's colours %s" % (name, seen))
            check_hover(b, name, log, p)
            check_oom(b, name, p)
            check_zoom(b, name, p)
            check_marks(b, name, log, p)
            check_flame(b, name, p)
    finally:
        b.close()
    print("%d failed" % len(failures) if failures else "all browser checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
