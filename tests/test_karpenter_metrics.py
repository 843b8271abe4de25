"""Reading Karpenter's metrics exposition (sources/karpenter.py): the offering cells, and hostile bodies refused
with one clear error or kept with a note, in bounded memory."""

from __future__ import annotations

import http.server
import pathlib
import threading
from collections.abc import Iterator

import pytest

from simulation import live
from sources import karpenter

FIXTURE = pathlib.Path(__file__).resolve().parent / "karpenter_fixtures" / "handmade-aws-us-east-1.prom"
AVAIL = karpenter.AVAILABLE
PRICE = karpenter.PRICE


def series(family: str, instance_type: str, capacity_type: str, zone: str, value: str) -> str:
    return f'{family}{{capacity_type="{capacity_type}",instance_type="{instance_type}",zone="{zone}"}} {value}\n'


def offering(instance_type: str = "m5.large", capacity_type: str = "on-demand", zone: str = "us-east-1a",
             available: str = "1", price: str = "0.096") -> str:
    return (series(AVAIL, instance_type, capacity_type, zone, available)
            + series(PRICE, instance_type, capacity_type, zone, price))


def test_the_fixture_reads_as_its_cells() -> None:
    cells, notes = karpenter.parse(FIXTURE.read_bytes())
    assert notes == ()
    assert len(cells) == 14
    assert live.Cell("m5.large", "on-demand", "us-east-1a", True, 0.0864) in cells
    assert live.Cell("c5.large", "spot", "us-east-1b", False, 0.0335) in cells
    assert live.Cell("m5.large", "reserved", "us-east-1a", True, 9.6e-09) in cells


def test_labels_in_any_order_with_escapes_extra_labels_and_timestamps() -> None:
    body = (f'{AVAIL}{{zone="us-east-1a", job="karpenter",instance_type="a\\"b\\\\c",capacity_type="spot",}} 1 '
            f'1700000000000\n{PRICE}{{instance_type="a\\"b\\\\c",zone="us-east-1a",capacity_type="spot"}} 2.5e-1\n')
    cells, _ = karpenter.parse(body.encode())
    assert cells == (live.Cell('a"b\\c', "spot", "us-east-1a", True, 0.25),)


@pytest.mark.parametrize("price", ["NaN", "+Inf", "-Inf", "-0.5"])
def test_a_price_that_is_not_a_price_is_dropped_with_a_note(price: str) -> None:
    cells, notes = karpenter.parse((offering(price=price) + offering(zone="us-east-1b")).encode())
    assert [c.price for c in cells] == [None, 0.096]
    assert len(notes) == 1 and "us-east-1a" in notes[0]


def test_an_availability_other_than_0_or_1_drops_the_cell() -> None:
    cells, notes = karpenter.parse((offering(available="NaN") + offering(zone="us-east-1b")).encode())
    assert [c.zone for c in cells] == ["us-east-1b"]
    assert len(notes) == 1


def test_a_series_twice_with_two_values_is_refused() -> None:
    body = offering() + series(PRICE, "m5.large", "on-demand", "us-east-1a", "0.2")
    with pytest.raises(karpenter.MetricsError, match="twice"):
        karpenter.parse(body.encode())


def test_a_series_twice_with_one_value_is_read_once() -> None:
    cells, _ = karpenter.parse((offering() + offering()).encode())
    assert len(cells) == 1


def test_a_price_without_availability_is_left_out_with_a_note() -> None:
    body = offering() + series(PRICE, "c5.large", "on-demand", "us-east-1a", "0.085")
    cells, notes = karpenter.parse(body.encode())
    assert [c.instance_type for c in cells] == ["m5.large"]
    assert len(notes) == 1 and "c5.large" in notes[0]


def test_availability_without_a_price_is_kept_unpriced_with_a_note() -> None:
    body = offering() + series(AVAIL, "c5.large", "on-demand", "us-east-1a", "1")
    cells, notes = karpenter.parse(body.encode())
    assert live.Cell("c5.large", "on-demand", "us-east-1a", True, None) in cells
    assert len(notes) == 1 and "c5.large" in notes[0]


def test_only_prices_is_refused() -> None:
    with pytest.raises(karpenter.MetricsError, match=r"no .*available series"):
        karpenter.parse(series(PRICE, "m5.large", "spot", "us-east-1a", "1").encode())


@pytest.mark.parametrize("body", [b"", b"# nothing here\n", b"<html>502 Bad Gateway</html>\n", b"\x00\xff\xfe\n",
                                  b"go_goroutines 3\n"], ids=["empty", "comment", "html", "binary", "others"])
def test_no_offering_series_is_refused(body: bytes) -> None:
    with pytest.raises(karpenter.MetricsError):
        karpenter.parse(body)


def test_a_truncated_body_is_refused() -> None:
    body = FIXTURE.read_bytes()
    with pytest.raises(karpenter.MetricsError, match="truncated"):
        karpenter.parse(body[:len(body) // 2])


@pytest.mark.parametrize("line", [
    f'{AVAIL}{{capacity_type="spot",instance_type="m5.large",zone="us-east-1a"}}\n',
    f'{AVAIL}{{capacity_type="spot",instance_type="m5.large",zone="us-east-1a" 1\n',
    f'{AVAIL}{{capacity_type="spot",instance_type="m5.large"}} 1\n',
    f'{AVAIL}{{capacity_type="spot",instance_type="m5.large",zone=us-east-1a}} 1\n',
    f'{AVAIL}{{capacity_type="spot",instance_type="m5.large",zone="us-east-1a"}} one\n',
], ids=["no-value", "unclosed", "no-zone", "unquoted", "not-a-number"])
def test_a_garbled_line_of_the_families_is_refused_naming_it(line: str) -> None:
    with pytest.raises(karpenter.MetricsError, match="line 3"):
        karpenter.parse((offering() + line).encode())


def test_too_many_series_are_refused() -> None:
    body = "".join(offering(instance_type=f"t{i}.large") for i in range(50_001))
    with pytest.raises(karpenter.MetricsError, match="more than 100000"):
        karpenter.parse(body.encode())


def test_the_series_cap_is_a_parameter() -> None:
    with pytest.raises(karpenter.MetricsError, match="more than 3"):
        karpenter.parse((offering() + offering(zone="b")).encode(), max_series=3)


def test_a_body_over_the_byte_cap_is_refused_before_it_is_all_read() -> None:
    served: list[int] = []

    def chunks() -> Iterator[bytes]:
        for _ in range(100):
            served.append(1)
            yield b"x" * 1024 * 1024

    with pytest.raises(karpenter.MetricsError, match="larger than"):
        karpenter.read_bounded(chunks(), 32 * 1024 * 1024)
    assert len(served) == 33


@pytest.mark.parametrize("text,expected", [
    ("karpenter/karpenter", "karpenter/karpenter:http-metrics"),
    ("kube-system/karpenter:8080", "kube-system/karpenter:8080"),
])
def test_a_named_service(text: str, expected: str) -> None:
    assert str(karpenter.parse_service(text)) == expected


@pytest.mark.parametrize("text", ["karpenter", "/karpenter", "ns/", ""])
def test_a_misnamed_service_is_refused(text: str) -> None:
    with pytest.raises(karpenter.MetricsError, match="NAMESPACE/NAME"):
        karpenter.parse_service(text)


def test_the_proxy_path_is_the_api_servers() -> None:
    assert karpenter.parse_service("karpenter/karpenter").proxy_path == \
        "/api/v1/namespaces/karpenter/services/karpenter:http-metrics/proxy/metrics"


class _Big(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        try:
            for _ in range(50):  # 50 MiB, of which the reader takes a little over its cap
                self.wfile.write(b"# " + b"x" * (1024 * 1024 - 3) + b"\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args: object) -> None:
        pass


def test_a_50_mib_body_over_http_is_refused() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Big)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(karpenter.MetricsError, match="larger than"):
            karpenter.fetch_url(f"http://127.0.0.1:{server.server_port}/metrics", max_bytes=8 * 1024 * 1024)
    finally:
        server.shutdown()
        server.server_close()


def test_not_a_url_is_refused() -> None:
    with pytest.raises(karpenter.MetricsError, match="URL"):
        karpenter.fetch_url("file:///etc/passwd")


def test_nobody_answering_is_unreachable() -> None:
    with pytest.raises(karpenter.Unreachable):
        karpenter.fetch_url("http://127.0.0.1:9/metrics", timeout=5)


def test_another_family_sharing_the_prefix_is_skipped() -> None:
    other = f'{AVAIL}_total{{capacity_type="spot"}} 7\n{PRICE}_seconds 3\n'
    cells, notes = karpenter.parse((other + offering()).encode())
    assert len(cells) == 1 and notes == ()


TRICKY = (series(AVAIL, "m5.large", "on-demand", "us-east-1a", "1")
          + f'{PRICE}{{zone="us-east-1a" , instance_type="m5.large",capacity_type="on-demand",extra="a\\"b\\\\c\\n"}} '
            '0.096 1700000000000\n'
          + series(AVAIL, 'odd\\"name', "spot", "us-east-1b", "0") + series(PRICE, 'odd\\"name', "spot", "us-east-1b",
                                                                              "+Inf")
          + "# HELP other_metric Another family.\n# TYPE other_metric counter\nother_metric_total 3\n")


@pytest.mark.parametrize("body", [FIXTURE.read_bytes(), TRICKY.encode(), next(
    (pathlib.Path(__file__).resolve().parent / "fixtures" / "karpenter-metrics").glob("*.prom")).read_bytes()],
    ids=["handmade", "tricky", "captured-from-karpenter"])
def test_the_hand_parser_reads_what_prometheus_clients_parser_reads(body: bytes) -> None:
    """prometheus_client's text parser as the oracle of the two families (the hand parser is kept for speed and
    bounded memory: docs/design.md §8); the cells it keeps agree series for series."""
    from prometheus_client.parser import text_string_to_metric_families

    oracle: dict[str, dict[tuple[str, str, str], float]] = {AVAIL: {}, PRICE: {}}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name in oracle:
                labels = sample.labels
                oracle[sample.name][(labels["instance_type"], labels["capacity_type"], labels["zone"])] = sample.value
    cells, _ = karpenter.parse(body)
    assert {(c.instance_type, c.capacity_type, c.zone): c.available for c in cells} == {
        key: value == 1.0 for key, value in oracle[AVAIL].items()}
    assert {(c.instance_type, c.capacity_type, c.zone): c.price for c in cells if c.price is not None} == {
        key: value for key, value in oracle[PRICE].items() if key in oracle[AVAIL] and 0 <= value < float("inf")}
