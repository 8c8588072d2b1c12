"""The SSRF guard: which destinations a webhook may reach, and that the checked address is used."""

from __future__ import annotations

import pytest

from memvault.webhooks.delivery.addresses import AddressRefused, check


class TestRefused:
    @pytest.mark.parametrize(
        ("url", "reason"),
        [
            ("https://127.0.0.1/in", "loopback"),
            ("https://[::1]/in", "loopback"),
            ("https://[::ffff:127.0.0.1]/in", "loopback"),
            ("https://10.1.2.3/in", "private"),
            ("https://192.168.0.10/in", "private"),
            ("https://172.16.5.5/in", "private"),
            ("https://169.254.169.254/latest/meta-data", "metadata"),
            ("https://[fd00:ec2::254]/", "metadata"),
            ("https://169.254.10.10/", "link-local"),
            ("https://0.0.0.0/", "unspecified"),
            ("https://224.0.0.1/", "multicast"),
            ("https://100.64.0.1/", "not a public address"),
            ("https://localhost/in", "loopback"),
        ],
    )
    async def test_internal_addresses(self, url: str, reason: str) -> None:
        with pytest.raises(AddressRefused, match=reason):
            await check(url, allow_private=False)

    async def test_plain_http_is_refused_unless_allowed(self) -> None:
        with pytest.raises(AddressRefused, match="plain http"):
            await check("http://93.184.215.14/in", allow_private=False)
        assert (await check("http://127.0.0.1:9/in", allow_private=True)).url == "http://127.0.0.1:9/in"

    @pytest.mark.parametrize("url", ["ftp://example.com/", "https://user:pw@93.184.215.14/", "https:///nohost"])
    async def test_other_shapes(self, url: str) -> None:
        with pytest.raises(AddressRefused):
            await check(url, allow_private=True)


class TestPinned:
    async def test_the_request_goes_to_the_checked_address_named_as_the_host(self) -> None:
        target = await check("https://localhost:8443/hooks/in?x=1", allow_private=True)
        assert target.url in ("https://127.0.0.1:8443/hooks/in?x=1", "https://[::1]:8443/hooks/in?x=1")
        assert (target.host, target.host_header) == ("localhost", "localhost:8443")

    async def test_a_public_literal_passes(self) -> None:
        target = await check("https://93.184.215.14/in", allow_private=False)
        assert target.address == "93.184.215.14"
