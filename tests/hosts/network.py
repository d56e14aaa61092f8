"""Hosts of their own on one machine: a Linux network namespace per host, joined by veth links to a bridge in a
namespace of its own (the "switch"), and the faults between them.

Every namespace is named `<prefix>-<host>`, the prefix `hostsnet-<pid>-<token>` of this run; the addresses
(10.38.0.0/24) exist only inside these namespaces, so runs side by side never meet. `sweep_stale()` removes the
namespaces of runs whose process is gone (a crashed run), and `Network.remove()` this run's.

Faults, each healed by `heal()`:
- `link_down(host)`: its link to the switch goes down (both directions, every peer);
- `partition(a, b)`: nothing passes between a and b (nftables rules in both namespaces);
- `drop_one_way(source, target)`: packets from source to target are dropped; the other way passes
  (requests arrive, answers are lost: `drop_one_way(receiver, dispatcher)`);
- `loss(host, percent)`: that share of the packets the host receives and sends is dropped
  (`numgen random mod 100 < N drop`);
- `relay_mode(host, mode)`: the relay in front of the host's server drops (holds) or resets its connections;
- `delay(host, seconds)`: every packet to and from the host waits. `tc netem` where the kernel has it
  (`netem_available()`); this machine's kernel has none (a Firecracker guest: CONFIG_NET_SCH_NETEM unset,
  modules off, and no NFT_QUEUE either), so there the delay is made by a relay process on the path
  (`tests/hosts/relay.py`) in front of the host's server, which waits before passing each chunk on.
"""

import contextlib
import functools
import os
import re
import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

SUBNET = "10.38.0"
BASE = "hostsnet"
TABLE = "hostsfaults"


def run(*args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(args, input=input, capture_output=True, text=True, timeout=60)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


def namespaces() -> list[str]:
    out = run("ip", "netns", "list").stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _remove_namespace(name: str) -> None:
    # Processes left in it (a crashed run's) are killed first: a namespace lives as long as they do.
    pids = run("ip", "netns", "pids", name, check=False).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), 9)
    run("ip", "netns", "delete", name, check=False)


def sweep_stale() -> list[str]:
    """Remove the namespaces of runs whose process is gone; returns their names."""
    removed = []
    for name in namespaces():
        match = re.fullmatch(rf"{BASE}-(\d+)-\w+-.+", name)
        if match and not Path(f"/proc/{match.group(1)}").exists():
            _remove_namespace(name)
            removed.append(name)
    return removed


@functools.cache
def netem_available() -> bool:
    """Whether this kernel can delay packets with `tc netem` (tried once, in a scratch namespace)."""
    name = f"{BASE}-{os.getpid()}-probe-netem"
    run("ip", "netns", "add", name)
    try:
        done = run(
            "ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "lo", "root", "netem",
            "delay", "1ms", check=False,
        )  # fmt: skip
        return done.returncode == 0
    finally:
        run("ip", "netns", "delete", name, check=False)


@dataclass
class Host:
    name: str
    namespace: str
    address: str
    switch_port: str
    # Faults in force on this host: peers it drops packets from / to, and a loss share.
    drop_from: set[str] = field(default_factory=set)
    drop_to: set[str] = field(default_factory=set)
    # Peers to which only packets carrying data are lost: connections open, requests arrive, answers do not.
    drop_data_to: set[str] = field(default_factory=set)
    loss_percent: int = 0

    def command(self, *args: str) -> list[str]:
        """`args` run inside this host's namespace."""
        return ["ip", "netns", "exec", self.namespace, *args]


class Network:
    def __init__(self) -> None:
        sweep_stale()
        self.prefix = f"{BASE}-{os.getpid()}-{secrets.token_hex(3)}"
        self.switch = f"{self.prefix}-switch"
        self.hosts: dict[str, Host] = {}
        self.relays: dict[str, Path] = {}
        # What each relay's control file says: its delay each way and its mode (drop, reset or none).
        self.relay_delays: dict[str, float] = {}
        self.relay_modes: dict[str, str] = {}
        run("ip", "netns", "add", self.switch)
        run("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", self.switch, "link", "set", "br0", "up")

    def add_host(self, name: str) -> Host:
        index = len(self.hosts) + 1
        host = Host(name, f"{self.prefix}-{name}", f"{SUBNET}.{10 + index}", f"p{index}")
        run("ip", "netns", "add", host.namespace)
        run(
            "ip", "-n", self.switch, "link", "add", host.switch_port, "type", "veth",
            "peer", "name", "eth0", "netns", host.namespace,
        )  # fmt: skip
        run("ip", "-n", self.switch, "link", "set", host.switch_port, "master", "br0", "up")
        run("ip", "-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", "eth0")
        run("ip", "-n", host.namespace, "link", "set", "eth0", "up")
        run("ip", "-n", host.namespace, "link", "set", "lo", "up")
        self.hosts[name] = host
        self._apply(host)
        return host

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    # Faults.

    def link_down(self, name: str) -> None:
        run("ip", "-n", self.switch, "link", "set", self.hosts[name].switch_port, "down")

    def partition(self, a: str, b: str) -> None:
        self.drop_one_way(a, b)
        self.drop_one_way(b, a)

    def unpartition(self, a: str, b: str) -> None:
        """Lift what `partition`, `drop_one_way` and `drop_answers` put between a and b (both ways), and
        nothing else: other faults on either host stay."""
        for source, target in ((a, b), (b, a)):
            host, address = self.hosts[source], self.hosts[target].address
            host.drop_to.discard(address)
            host.drop_data_to.discard(address)
            self._apply(host)

    def drop_one_way(self, source: str, target: str) -> None:
        """Packets from `source` to `target` are lost (dropped as they leave `source`)."""
        host = self.hosts[source]
        host.drop_to.add(self.hosts[target].address)
        self._apply(host)

    def drop_answers(self, source: str, target: str) -> None:
        """Packets carrying data from `source` to `target` are lost; the handshake and bare
        acknowledgements pass, so `target`'s connections open and its requests arrive (and are
        acknowledged), but `source`'s answers never reach it."""
        host = self.hosts[source]
        host.drop_data_to.add(self.hosts[target].address)
        self._apply(host)

    def loss(self, name: str, percent: int) -> None:
        host = self.hosts[name]
        host.loss_percent = percent
        self._apply(host)

    def delay(self, name: str, seconds: float) -> None:
        """Each round trip over the host's link takes `seconds` longer (netem: on the packets it sends; the
        relay: half on each way through it)."""
        host = self.hosts[name]
        if netem_available():
            verb = "replace" if seconds else "del"
            args = ["netem", "delay", f"{int(seconds * 1000)}ms"] if seconds else []
            run(
                "ip",
                "-n",
                host.namespace,
                "tc",
                "qdisc",
                verb,
                "dev",
                "eth0",
                "root",
                *args,
                check=False,
            )
            return
        self.relay_delays[name] = seconds / 2
        self._write_relay(name)

    def relay_mode(self, name: str, mode: str) -> None:
        """The fault of the relay in front of `name`'s server (tests/hosts/relay.py): `drop` (nothing passes
        until it ends), `reset` (every connection reset while it lasts), or "" (none)."""
        self.relay_modes[name] = mode
        self._write_relay(name)

    def _write_relay(self, name: str) -> None:
        control = self.relays.get(name)
        if control is None:
            raise RuntimeError(f"no netem on this kernel and no relay on host {name}")
        tmp = control.with_suffix(".tmp")
        tmp.write_text(f"{self.relay_delays.get(name, 0.0)} {self.relay_modes.get(name, '')}\n")
        tmp.replace(control)

    def heal(self, name: str | None = None) -> None:
        """Every fault on `name` (every host when None) is lifted."""
        for host in [self.hosts[name]] if name else list(self.hosts.values()):
            host.drop_from.clear()
            host.drop_to.clear()
            host.drop_data_to.clear()
            host.loss_percent = 0
            self._apply(host)
            run("ip", "-n", self.switch, "link", "set", host.switch_port, "up")
            if host.name in self.relays:
                self.relay_modes.pop(host.name, None)
                self.relay_delays.pop(host.name, None)
                self._write_relay(host.name)
            if netem_available():
                self.delay(host.name, 0)

    def _apply(self, host: Host) -> None:
        """The host's nftables table, replaced whole in one transaction (`nft -f`)."""
        inbound = [f"ip saddr {addr} drop" for addr in sorted(host.drop_from)]
        outbound = [f"ip daddr {addr} drop" for addr in sorted(host.drop_to)]
        # A bare TCP acknowledgement (timestamps on) is 52 bytes of IP; an HTTP answer is more than 100.
        outbound += [f"ip daddr {addr} ip length > 100 drop" for addr in sorted(host.drop_data_to)]
        if host.loss_percent:
            # Only the links between hosts: loopback (a relay to its server) loses nothing.
            lossy = f'iifname "eth0" numgen random mod 100 < {host.loss_percent} drop'
            inbound.append(lossy)
            outbound.append(lossy.replace("iifname", "oifname"))
        chains = "".join(
            f"chain {hook} {{\ntype filter hook {hook} priority 0; policy accept;\n"
            + "".join(f"{rule}\n" for rule in rules)
            + "}\n"
            for hook, rules in (("input", inbound), ("output", outbound))
        )
        script = (
            f"table inet {TABLE}\ndelete table inet {TABLE}\ntable inet {TABLE} {{\n{chains}}}\n"
        )
        run("ip", "netns", "exec", host.namespace, "nft", "-f", "-", input=script)

    def remove(self) -> None:
        for host in self.hosts.values():
            _remove_namespace(host.namespace)
        _remove_namespace(self.switch)
        self.hosts.clear()
