"""The TLS certificates that the course's scheduler, workers and instructor speak with (``make cluster-certs``).

Dask's scheduler and workers unpickle what their peers send: a port that anyone may connect to is a way in.
So every connection is TLS with a certificate of the course's own authority, checked both ways (Dask's
:class:`~distributed.security.Security` requires the peer's certificate, and a peer without one signed by the
course's authority is refused before a message is read). The folder (``grades/.cluster/`` by default, readable
by its owner alone) holds:

- ``ca.pem``: the course's authority, which every member checks its peers against;
- ``ca-key.pem``: its key, which signs members' certificates: it stays with the instructor;
- ``member.pem``, ``member-key.pem``: the certificate and key that the scheduler, each grading host and the
  instructor's ``make grade`` present. Copy the folder without ``ca-key.pem`` to each grading host.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

FOLDER = Path("grades") / ".cluster"  # under the course folder, beside the grader's own state
AUTHORITY, AUTHORITY_KEY = "ca.pem", "ca-key.pem"
MEMBER, MEMBER_KEY = "member.pem", "member-key.pem"
NEEDED = (AUTHORITY, MEMBER, MEMBER_KEY)  # what a member reads


class CertificatesMissing(Exception):
    """A member's certificate folder lacks a file (made by ``make cluster-certs``)."""


def make(folder: Path, days: int = 365, force: bool = False) -> list[Path]:
    """Write a new authority and a member's certificate signed by it into ``folder`` (made, mode 0700), each key
    readable by its owner alone; the files written. ``force``: replace those there (else they are kept, and a
    FileExistsError names them)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    if days < 1:
        raise ValueError(f"days: the certificates' life must be at least 1 day, got {days}")
    folder = Path(folder)
    paths = [folder / name for name in (AUTHORITY, AUTHORITY_KEY, MEMBER, MEMBER_KEY)]
    there = [str(path) for path in paths if path.exists()]
    if there and not force:
        raise FileExistsError(f"certificates are there already ({', '.join(there)}); --force replaces them")
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    now = datetime.datetime.now(datetime.timezone.utc)
    until = now + datetime.timedelta(days=days)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "attention course grading"),
                          x509.NameAttribute(NameOID.COMMON_NAME, common)])  # fmt: skip

    authority_key = ec.generate_private_key(ec.SECP256R1())
    authority = (
        x509.CertificateBuilder()
        .subject_name(name("course authority"))
        .issuer_name(name("course authority"))
        .public_key(authority_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(authority_key, hashes.SHA256())
    )
    member_key = ec.generate_private_key(ec.SECP256R1())
    member = (
        x509.CertificateBuilder()
        .subject_name(name("grading member"))
        .issuer_name(authority.subject)
        .public_key(member_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(authority_key, hashes.SHA256())
    )
    pem, plain = serialization.Encoding.PEM, serialization.NoEncryption()
    keys = serialization.PrivateFormat.PKCS8
    contents = {
        AUTHORITY: authority.public_bytes(pem),
        AUTHORITY_KEY: authority_key.private_bytes(pem, keys, plain),
        MEMBER: member.public_bytes(pem),
        MEMBER_KEY: member_key.private_bytes(pem, keys, plain),
    }
    for path in paths:
        _write_private(path, contents[path.name])
    return paths


def _write_private(path: Path, data: bytes) -> None:
    """``data`` into ``path`` with mode 0600, never through a link, replacing what is there whole."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.part")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    partial.replace(path)


def security(folder: Path):
    """The :class:`distributed.Security` of a member whose certificates are in ``folder``: TLS required, with
    the member's certificate, its peers checked against the course's authority."""
    from distributed.security import Security

    folder = Path(folder)
    missing = [name for name in NEEDED if not (folder / name).is_file()]
    if missing:
        raise CertificatesMissing(
            f"the cluster's certificates: {folder} has no {', '.join(missing)} (make them with make cluster-certs, "
            "and copy the folder, without ca-key.pem, to each grading host)"
        )
    files = {"ca_file": str(folder / AUTHORITY), "cert": str(folder / MEMBER), "key": str(folder / MEMBER_KEY)}
    return Security(
        require_encryption=True,
        tls_ca_file=files["ca_file"],
        tls_client_cert=files["cert"],
        tls_client_key=files["key"],
        tls_scheduler_cert=files["cert"],
        tls_scheduler_key=files["key"],
        tls_worker_cert=files["cert"],
        tls_worker_key=files["key"],
    )
