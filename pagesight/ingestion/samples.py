"""A small sample set generated on the spot, for ``make demo`` and for tests.

Four PDFs that exercise each parse route: born-digital text with headings and an outline, a
ruled table, a chart (a raster figure with a caption), and a scanned page (text only as pixels,
slightly skewed, with noise). Nothing is downloaded and nothing is committed as binary.
"""

from __future__ import annotations

import io
import random
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter, ImageFont

_FONT_CANDIDATES = (
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
)

SCAN_LINES = (
    "QUARTERLY MAINTENANCE REPORT",
    "The pump station at Riverside was inspected on 12 March.",
    "Two valves were replaced and the pressure sensor was calibrated.",
    "Energy use fell by 14 percent compared with the previous quarter.",
    "The next inspection is planned for the second week of June.",
)


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    for candidate in _FONT_CANDIDATES:
        if Path(candidate).exists():
            return ImageFont.truetype(candidate, size)
    return ImageFont.load_default(size)


def _png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def text_pdf(path: Path) -> Path:
    import pymupdf

    doc = pymupdf.open()
    sections = [
        (
            "Annual Overview",
            "Northwind Logistics moved 4.2 million parcels in 2024, a record for the company. "
            "Growth came mostly from same-day delivery in metropolitan areas.",
        ),
        (
            "Risk Factors",
            "Fuel prices remain the largest cost risk. A sustained rise of ten percent would "
            "reduce operating margin by roughly one point. Labour shortages in peak season are "
            "the second risk.",
        ),
    ]
    page = doc.new_page()
    html = "<h1>Northwind Logistics Annual Report</h1>" + "".join(
        f"<h2>{title}</h2><p>{body}</p>" for title, body in sections
    )
    page.insert_htmlbox(pymupdf.Rect(72, 72, 540, 720), html)
    doc.set_toc([[1, "Northwind Logistics Annual Report", 1], *[[2, t, 1] for t, _ in sections]])
    doc.save(path)
    return path


def table_pdf(path: Path) -> Path:
    import pymupdf

    rows = [("Region", "Revenue 2023", "Revenue 2024"), ("North", "120.5", "131.0")]
    rows += [("South", "98.2", "104.7"), ("East", "143.9", "150.2"), ("West", "87.1", "95.4")]
    cells = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    html = (
        "<h2>Revenue by Region</h2><p>All figures are in millions of US dollars.</p>"
        "<p>Table 1: Revenue by region, fiscal years 2023 and 2024</p>"
        f'<table border="1" cellpadding="4">{cells}</table>'
    )
    doc = pymupdf.open()
    doc.new_page().insert_htmlbox(pymupdf.Rect(72, 72, 540, 500), html)
    doc.save(path)
    return path


def chart_image(width: int = 900, height: int = 560) -> Image.Image:
    """A bar chart as pixels: what a chart in a scanned or exported report looks like."""
    values = {"North": 131, "South": 105, "East": 150, "West": 95}
    img = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(img)
    base, left, bar_w = height - 80, 90, 120
    draw.line((left, 40, left, base), fill="black", width=3)
    draw.line((left, base, width - 40, base), fill="black", width=3)
    font = _font(26)
    for i, (label, value) in enumerate(values.items()):
        x0 = left + 40 + i * (bar_w + 60)
        top = base - value * 2.6
        draw.rectangle((x0, top, x0 + bar_w, base), fill=(40, 90, 170))
        draw.text((x0 + 20, base + 15), label, fill="black", font=font)
        draw.text((x0 + 30, top - 34), str(value), fill="black", font=font)
    return img


def chart_pdf(path: Path) -> Path:
    import pymupdf

    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_htmlbox(pymupdf.Rect(72, 60, 540, 100), "<h2>Regional revenue, fiscal 2024</h2>")
    page.insert_image(pymupdf.Rect(72, 110, 540, 400), stream=_png(chart_image()))
    page.insert_htmlbox(
        pymupdf.Rect(72, 410, 540, 440),
        "<p>Figure 1: Revenue by region in fiscal 2024 (millions of US dollars)</p>",
    )
    page.insert_htmlbox(
        pymupdf.Rect(72, 470, 540, 560),
        "<p>The East region grew fastest and is now the largest market.</p>",
    )
    doc.save(path)
    return path


def scanned_page_image(lines: tuple[str, ...] = SCAN_LINES, seed: int = 7) -> Image.Image:
    """A page of text as a noisy, slightly skewed 200-dpi bitmap (no text layer)."""
    rng = random.Random(seed)  # noqa: S311  # seeded noise for a sample page
    img = Image.new("L", (1700, 2200), 255)
    draw = ImageDraw.Draw(img)
    y = 200
    for i, line in enumerate(lines):
        draw.text((160, y), line, fill=0, font=_font(52 if i == 0 else 38))
        y += 110 if i == 0 else 80
    img = img.rotate(0.8, expand=False, fillcolor=255, resample=Image.Resampling.BICUBIC)
    pixels = img.load()
    assert pixels is not None
    for _ in range(6000):
        pixels[rng.randrange(img.width), rng.randrange(img.height)] = rng.choice((0, 120))
    return img.filter(ImageFilter.GaussianBlur(0.6)).convert("RGB")


def scan_pdf(path: Path) -> Path:
    import pymupdf

    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_image(page.rect, stream=_png(scanned_page_image()))
    doc.save(path)
    return path


def write_samples(folder: Path) -> list[Path]:
    """Write the four sample PDFs into ``folder`` and return their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    return [
        text_pdf(folder / "sample-text.pdf"),
        table_pdf(folder / "sample-table.pdf"),
        chart_pdf(folder / "sample-chart.pdf"),
        scan_pdf(folder / "sample-scan.pdf"),
    ]
