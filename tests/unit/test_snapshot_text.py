"""The text of a snapshot, pure: Kitsune's refs, password values hidden, the interactive view, the cut, the diff."""

from __future__ import annotations

from bridge.browser.snapshot_text import REDACTED, cut, diff, interactive, lines_of, redact_values, tagged

RAW = """- generic [active] [ref=e1]:
  - heading "Form" [level=1] [ref=e2]
  - main [ref=e3]:
    - generic [ref=e4]:
      - text: Name
      - textbox "Name" [ref=e5]: Ada
      - textbox "Password" [ref=e6]: "s3cret: yes"
      - button "Submit" [ref=e7] [cursor=pointer]
    - iframe [ref=e8]:
      - button "Inside" [ref=f1e2]
    - paragraph [ref=e9]: Some text"""


def test_refs_carry_their_tag_and_frame_refs_keep_their_frame() -> None:
    text = tagged(RAW, "t3d2")
    assert '[ref=t3d2e5]' in text and '[ref=t3d2f1e2]' in text and "[ref=e" not in text
    assert [line.ref for line in lines_of(text) if line.role == "button"] == ["t3d2e7", "t3d2f1e2"]


def test_a_password_value_never_shows_even_quoted() -> None:
    text = redact_values(tagged(RAW, "t1d1"), ["s3cret: yes", ""])
    assert "s3cret" not in text and f'textbox "Password" [ref=t1d1e6]: {REDACTED}' in text
    assert 'textbox "Name" [ref=t1d1e5]: Ada' in text


def test_interactive_keeps_what_one_acts_on_and_its_headings_and_landmarks() -> None:
    kept = [line.text.strip() for line in interactive(lines_of(tagged(RAW, "t1d1")))]
    assert kept[0].startswith('- heading "Form"') and "- main [ref=t1d1e3]:" in kept
    assert not [line for line in kept if "paragraph" in line or "text: Name" in line]


def test_a_cut_keeps_whole_lines_and_says_where_the_rest_starts() -> None:
    lines = lines_of(tagged(RAW, "t1d1"))
    first = cut(lines, 0, 120)
    assert first.next_offset == first.shown and len(first.text) <= 120
    assert first.text.split("\n") == [line.text for line in lines[: first.shown]]
    rest = cut(lines, first.next_offset or 0, 10_000)
    assert rest.next_offset is None and first.text + "\n" + rest.text == tagged(RAW, "t1d1")


def test_a_diff_names_added_removed_and_changed_elements_by_ref_not_focus_moves() -> None:
    before = lines_of(tagged(RAW, "t1d1"))
    after_raw = RAW.replace("- generic [active] [ref=e1]", "- generic [ref=e1]").replace(
        'textbox "Name" [ref=e5]: Ada', 'textbox "Name" [active] [ref=e5]: Grace').replace(
        '      - button "Submit" [ref=e7] [cursor=pointer]\n', "") + '\n    - link "More" [ref=e10]'
    changes = diff(before, lines_of(tagged(after_raw, "t1d1")))
    assert changes == ['~ - textbox "Name" [ref=t1d1e5]: Grace', '+ - link "More" [ref=t1d1e10]',
                       '- - button "Submit" [ref=t1d1e7] [cursor=pointer]']
