"""The web scope's reading of domains, urls, dates and places: urls come from models and
pages (citations, redirects, search results), so every reader is tried on arbitrary text."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from deep_research.core.scope import WebScope, domain, host_of, location, parse_since

LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
DOMAIN = (
    st.lists(LABEL, min_size=2, max_size=4).map(".".join).filter(lambda d: not d.startswith("www."))
)


@given(st.text(max_size=200))
def test_any_text_is_read_as_a_url_without_raising(text: str) -> None:
    scope = WebScope(domains=("example.com",), exclude_domains=("evil.com",))
    assert scope.allows(text) in (True, False)
    assert isinstance(host_of(text), str)


@given(DOMAIN, st.lists(LABEL, max_size=2), st.sampled_from(["", ":8443"]), st.booleans())
def test_a_host_under_an_excluded_domain_is_never_allowed(
    excluded: str, subdomains: list[str], port: str, shout: bool
) -> None:
    host = ".".join([*subdomains, excluded])
    host = host.upper() if shout else host
    scope = WebScope(exclude_domains=(excluded,))
    for url in (f"https://{host}{port}/a", f"http://user@{host}./x?q=1", f"https://{host}#f"):
        assert not scope.allows(url), url


@given(DOMAIN, DOMAIN)
def test_with_allowed_domains_only_their_hosts_pass(allowed: str, other: str) -> None:
    scope = WebScope(domains=(allowed,))
    assert scope.allows(f"https://docs.{allowed}/page")
    assume(other != allowed and not other.endswith(f".{allowed}"))
    lookalike = f"https://{allowed}.{other}/"  # example.com.evil.org is not example.com
    assert not scope.allows(lookalike)


@pytest.mark.parametrize(
    ("given_as", "read_as"),
    [
        ("https://www.Example.com/a?b", "example.com"),
        ("*.arxiv.org", "arxiv.org"),
        ("example.com.", "example.com"),
        ("bücher.de", "xn--bcher-kva.de"),
    ],
)
def test_domains_are_read_as_bare_ascii_hosts(given_as: str, read_as: str) -> None:
    assert domain(given_as) == read_as


def test_a_unicode_host_meets_its_punycode_exclusion() -> None:
    scope = WebScope(exclude_domains=("bücher.de",))
    assert not scope.allows("https://BÜCHER.de/x")
    assert not scope.allows("https://shop.xn--bcher-kva.de/")
    assert scope.allows("https://buecher.de/")


@pytest.mark.parametrize("bad", ["", "localhost", "a..b", "http://[::1]/", "exa mple.com"])
def test_what_is_not_a_domain_is_refused_naming_it(bad: str) -> None:
    with pytest.raises(ValueError, match="not a domain"):
        domain(bad)


@given(st.integers(0, 99_999), st.sampled_from([("d", 1), ("w", 7), ("m", 30), ("y", 365)]))
def test_a_window_is_that_many_days_back_from_the_run_start(
    count: int, unit: tuple[str, int]
) -> None:
    today = date(2026, 11, 26)
    letter, days = unit
    try:
        expected = today - timedelta(days=count * days)
    except OverflowError:
        return
    assert parse_since(f"{count}{letter}", today) == expected


def test_a_date_is_a_date_and_words_are_refused() -> None:
    assert parse_since("2025-01-01", date(2026, 11, 26)) == date(2025, 1, 1)
    with pytest.raises(ValueError, match="not a date"):
        parse_since("last spring", date(2026, 11, 26))


@given(st.text(max_size=60))
def test_openai_only_ever_gets_a_two_letter_country(text: str) -> None:
    try:
        place = location(text)
    except ValueError:
        return
    sent = WebScope(location=place).user_location()
    assert sent["type"] == "approximate"
    assert set(sent) <= {"type", "city", "region", "country"}
    if "country" in sent:
        assert len(sent["country"]) == 2
        assert sent["country"].isalpha()
        assert sent["country"].isupper()


def test_places_are_read_as_city_region_country() -> None:
    assert WebScope(location="Berlin, de").user_location() == {
        "type": "approximate",
        "city": "Berlin",
        "country": "DE",
    }
    assert WebScope(location="Austin, Texas, US").user_location()["region"] == "Texas"
    assert WebScope(location="Berlin").user_location() == {"type": "approximate", "city": "Berlin"}
    assert WebScope().user_location() == {"type": "approximate"}
    with pytest.raises(ValueError, match="two-letter country"):
        location("Berlin, Germany")


def test_an_undated_page_is_in_any_window_and_an_older_one_is_not() -> None:
    scope = WebScope(since=date(2025, 1, 1))
    assert scope.dated_in(None)
    assert scope.dated_in(date(2025, 1, 1))
    assert not scope.dated_in(date(2024, 12, 31))
    assert WebScope().dated_in(date(1990, 1, 1))
