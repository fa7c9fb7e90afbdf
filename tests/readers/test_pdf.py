from hybridsearch.readers.base import SourceFile
from hybridsearch.readers.pdf import PdfReaderOfFiles


def tiny_pdf(pages: list[str], title: str) -> bytes:
    """A PDF of one line of Helvetica text a page, with a document title."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", ""]
    kids = []
    for text in pages:
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET"
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {len(objects)} 0 R "
                       f"/Resources << /Font << /F1 {2 + 2 * len(pages) + 1} 0 R >> >> >>")
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(pages)} >>"
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    objects.append(f"<< /Title ({title}) >>")
    out, offsets = b"%PDF-1.4\n", []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += (f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R /Info {len(objects)} 0 R >>\n"
            f"startxref\n{xref}\n%%EOF\n").encode()
    return out


def test_one_section_a_page_with_its_number(tmp_path):
    (tmp_path / "report.pdf").write_bytes(tiny_pdf(["Quarterly revenue grew", "Costs fell sharply"], "Q3 report"))
    [doc] = PdfReaderOfFiles().read(SourceFile(tmp_path / "report.pdf", tmp_path))
    assert doc.title == "Q3 report"
    pages = [(doc.text[s.start:s.end], s.metadata["page"]) for s in doc.sections]
    assert pages == [("Quarterly revenue grew", "1"), ("Costs fell sharply", "2")]
