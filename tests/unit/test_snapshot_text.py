"""The text of a snapshot, pure: Kitsune's refs, password values hidden, the compact text a model reads, the
interactive view, the cut, the diff."""

from __future__ import annotations

from driver.snapshot_text import REDACTED, Line, cut
from driver.snapshot_tree import MAX_DEPTH, Kept, diff, interactive, parse, render

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
    - paragraph [ref=e9]: Some text
    - 'heading "Step 2: pay" [level=2] [ref=e10]'
    - list [ref=e11]:
      - listitem [ref=e12]:
        - link "Shoes" [ref=e13] [cursor=pointer]:
          - /url: /item/1
        - text: $10.00
        - combobox "Size" [ref=e14]:
          - option "S" [selected]
          - option "M"
        - textbox "Note" [ref=e15]:
          - /placeholder: Say more
        - generic [ref=e16] [cursor=pointer]: Clickable"""


def _refs(raw: str, tag: str, role: str) -> list[str]:
    return [line.ref or "" for line in render(parse(raw, tag)) if line.role == role]


def test_refs_carry_their_tag_and_frame_refs_keep_their_frame() -> None:
    text = "\n".join(line.text for line in render(parse(RAW, "t3d2")))
    assert "[ref=t3d2e5]" in text and "[ref=t3d2f1e2]" in text and "[ref=e" not in text
    assert _refs(RAW, "t3d2", "button") == ["t3d2e7", "t3d2f1e2"]


def test_a_password_value_never_shows_even_quoted() -> None:
    text = "\n".join(line.text for line in render(parse(RAW, "t1d1", ["s3cret: yes", ""])))
    assert "s3cret" not in text and f'textbox "Password" [ref=t1d1e6]: {REDACTED}' in text
    assert 'textbox "Name" [ref=t1d1e5]: Ada' in text


def _text(lines: list[Line]) -> list[str]:
    return [line.text for line in lines]


def test_the_text_keeps_refs_on_what_one_acts_on_and_drops_what_a_model_cannot_use() -> None:
    shown = _text(render(parse(RAW, "t1d1")))
    assert shown == [
        '- heading "Form" [level=1] [ref=t1d1e2]',
        '- main [ref=t1d1e3]',
        '  - textbox "Name" [ref=t1d1e5]: Ada',
        '  - textbox "Password" [ref=t1d1e6]: "s3cret: yes"',
        '  - button "Submit" [ref=t1d1e7]',
        '  - iframe [ref=t1d1e8]',
        '    - button "Inside" [ref=t1d1f1e2]',
        '  - paragraph: Some text',
        '  - heading "Step 2: pay" [level=2] [ref=t1d1e10]',
        '  - list [ref=t1d1e11]',
        '    - listitem',
        '      - link "Shoes" [ref=t1d1e13] [url=/item/1]',
        '      - text: $10.00',
        '      - combobox "Size" [ref=t1d1e14]',
        '        - options: "S" [selected], "M"',
        '      - textbox "Note" [ref=t1d1e15] [placeholder=Say more]',
        '      - generic [ref=t1d1e16]: Clickable',
    ]  # no wrapper generic, no label repeating its field's name, no cursor, a YAML-quoted line unquoted,
    # a ref on what one acts on and on the regions one reads a part of the page by, not on a listitem


def test_interactive_keeps_what_one_acts_on_and_its_headings_and_landmarks() -> None:
    kept = _text(interactive(parse(RAW, "t1d1")))
    assert kept[:3] == ['- heading "Form" [level=1] [ref=t1d1e2]', "- main [ref=t1d1e3]",
                        '  - textbox "Name" [ref=t1d1e5]: Ada']
    assert '  - heading "Step 2: pay" [level=2] [ref=t1d1e10]' in kept
    assert '  - link "Shoes" [ref=t1d1e13] [url=/item/1]' in kept
    assert not [line for line in kept if "paragraph" in line or "listitem" in line or "$10.00" in line]
    assert sum("[ref=" in line for line in kept) == 8 + 3  # every element one acts on (the frame's too), and
    # the headings and landmarks


def test_a_landmark_with_nothing_to_act_on_and_no_heading_is_left_out() -> None:
    raw = '- navigation [ref=e1]:\n  - text: nothing here\n- main [ref=e2]:\n  - button "Go" [ref=e3]'
    assert _text(interactive(parse(raw, "t1d1"))) == ["- main [ref=t1d1e2]",
                                                                         '  - button "Go" [ref=t1d1e3]']


def test_a_cut_keeps_whole_lines_and_says_where_the_rest_starts() -> None:
    lines = render(parse(RAW, "t1d1"))
    first = cut(lines, 0, 120)
    assert first.next_offset == first.shown and len(first.text) <= 120
    assert first.text.split("\n") == [line.text for line in lines[: first.shown]]
    rest = cut(lines, first.next_offset or 0, 10_000)
    assert rest.next_offset is None and first.text + "\n" + rest.text == "\n".join(line.text for line in lines)


def test_a_diff_names_added_removed_and_changed_elements_by_ref_not_focus_moves() -> None:
    before = parse(RAW, "t1d1")
    after_raw = RAW.replace("- generic [active] [ref=e1]", "- generic [ref=e1]").replace(
        'textbox "Name" [ref=e5]: Ada', 'textbox "Name" [active] [ref=e5]: Grace').replace(
        '      - button "Submit" [ref=e7] [cursor=pointer]\n', "") + '\n    - link "More" [ref=e20]'
    changes = diff(before, parse(after_raw, "t1d1"))
    assert changes == ['~ - textbox "Name" [ref=t1d1e5]: Grace', '+ - link "More" [ref=t1d1e20]',
                       '- - button "Submit" [ref=t1d1e7]']


def test_a_diff_sees_a_text_appear_in_an_element_without_a_ref_of_its_own() -> None:
    before = parse(RAW, "t1d1")
    after = parse(RAW.replace("- paragraph [ref=e9]: Some text", "- paragraph [ref=e9]: Saved"), "t1d1")
    assert diff(before, after) == ["~ - paragraph: Saved"]
    assert diff(before, after, only_interactive=True) == []


def test_a_page_nested_past_any_bound_is_written_at_the_bound_whole() -> None:
    deep = "\n".join(f"{'  ' * level}- group \"g{level}\" [ref=e{level}]:" for level in range(5000))
    raw = deep + f"\n{'  ' * 5000}- button \"Go\" [ref=e5000]"
    lines = render(parse(raw, "t1d1"))  # the walks recurse: a page must not make them past Python's limit
    assert len(lines) == 5001 and max(line.indent for line in lines) == 2 * MAX_DEPTH
    assert lines[-1].ref == "t1d1e5000" and [line.ref for line in interactive(parse(raw, "t1d1"))] == ["t1d1e5000"]
    assert diff(parse(raw, "t1d1"), parse(raw.replace('"Go"', '"Stop"'), "t1d1")) == [
        '~ - button "Stop" [ref=t1d1e5000]']


def test_a_cut_of_a_snapshot_that_fits_keeps_it_whole_and_one_char_less_cuts_its_last_line() -> None:
    lines = render(parse(RAW, "t1d1"))
    whole = "\n".join(line.text for line in lines)
    assert cut(lines, 0, len(whole) + 1) == cut(lines, 0, 10**9)
    assert cut(lines, 0, len(whole) + 1).next_offset is None and cut(lines, 0, len(whole) + 1).text == whole
    assert cut(lines, 0, len(whole)).next_offset == len(lines) - 1  # each line counts its newline


def test_states_before_and_after_the_ref_and_escaped_quotes_in_a_name() -> None:
    raw = ('- heading "Say \\"hi\\": now" [level=2] [ref=e1]\n'
           '- button "Go" [ref=e2] [cursor=pointer] [box=1,2,3,4]\n- link "L" [active] [ref=e3] [cursor=pointer]')
    assert _text(render(parse(raw, "t1d1"))) == ['- heading "Say \\"hi\\": now" [level=2] [ref=t1d1e1]',
                                                 '- button "Go" [box=1,2,3,4] [ref=t1d1e2]',
                                                 '- link "L" [active] [ref=t1d1e3]']


def test_a_kept_snapshot_reads_as_it_was_and_never_keeps_a_password_value() -> None:
    kept = Kept(RAW, "t1d1", parse(RAW, "t1d1"), [])
    assert diff(kept.tree(), parse(RAW, "t1d1")) == []
    hidden = Kept(RAW, "t1d1", parse(RAW, "t1d1", ["s3cret: yes"]), ["s3cret: yes"])
    shown = "\n".join(_text(render(hidden.tree())))
    assert "s3cret" not in shown and REDACTED in shown and "s3cret" not in hidden._raw  # the text is not kept
