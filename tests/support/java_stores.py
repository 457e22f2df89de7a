"""Java key and trust stores made by Java's own `keytool` (Java 17, which `./dev test` installs for Spark), as a
Kafka operator makes them: a broker key pair generated into a JKS store whose key has a password of its own, the
same entry converted into a PKCS12 store by keytool, the broker's certificate exported as PEM (what clients
trust), and trust stores of both types holding a CA given as PEM (tests/support/tls.py's CA, which signs the
clients' certificates)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

STORE_PASSWORD = "store-secret"
KEY_PASSWORD = "key-secret"
TRUST_PASSWORD = "trust-secret"


@dataclass(frozen=True)
class JavaStores:
    jks_keystore: Path  # broker key pair; store password STORE_PASSWORD, key password KEY_PASSWORD
    pkcs12_keystore: Path  # the same entry, keytool-written PKCS12, STORE_PASSWORD for store and key
    jceks_keystore: Path  # a JCEKS store (which Moldau refuses)
    broker_certificate: Path  # the broker's certificate, PEM
    jks_truststore: Path  # the CA; TRUST_PASSWORD
    pkcs12_truststore: Path  # the CA; TRUST_PASSWORD


def keytool(*args: str) -> None:
    tool = shutil.which("keytool")
    if tool is None:
        raise RuntimeError("keytool not found: Java 17 is needed (Debian: openjdk-17-jre-headless; ./dev test "
                           "installs it)")
    done = subprocess.run([tool, *args], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"keytool {' '.join(args[:1])} failed:\n{done.stdout}{done.stderr}")


def make_java_stores(directory: Path, ca_pem: Path) -> JavaStores:
    directory.mkdir(parents=True, exist_ok=True)
    stores = JavaStores(directory / "broker.jks", directory / "broker.p12", directory / "broker.jceks",
                        directory / "broker.pem", directory / "trust.jks", directory / "trust.p12")
    keytool("-genkeypair", "-alias", "broker", "-keyalg", "RSA", "-keysize", "2048", "-validity", "30",
            "-dname", "CN=localhost,OU=nodes,O=Moldau", "-ext", "SAN=dns:localhost,ip:127.0.0.1",
            "-storetype", "JKS", "-keystore", str(stores.jks_keystore), "-storepass", STORE_PASSWORD,
            "-keypass", KEY_PASSWORD)
    keytool("-importkeystore", "-srckeystore", str(stores.jks_keystore), "-srcstoretype", "JKS",
            "-srcstorepass", STORE_PASSWORD, "-srckeypass", KEY_PASSWORD, "-srcalias", "broker",
            "-destkeystore", str(stores.pkcs12_keystore), "-deststoretype", "PKCS12",
            "-deststorepass", STORE_PASSWORD, "-destkeypass", STORE_PASSWORD)
    keytool("-exportcert", "-rfc", "-alias", "broker", "-keystore", str(stores.jks_keystore),
            "-storepass", STORE_PASSWORD, "-file", str(stores.broker_certificate))
    keytool("-genkeypair", "-alias", "other", "-keyalg", "EC", "-validity", "30", "-dname", "CN=other",
            "-storetype", "JCEKS", "-keystore", str(stores.jceks_keystore), "-storepass", STORE_PASSWORD,
            "-keypass", STORE_PASSWORD)
    for store, kind in ((stores.jks_truststore, "JKS"), (stores.pkcs12_truststore, "PKCS12")):
        keytool("-importcert", "-noprompt", "-alias", "ca", "-file", str(ca_pem), "-storetype", kind,
                "-keystore", str(store), "-storepass", TRUST_PASSWORD)
    return stores
