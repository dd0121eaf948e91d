"""ssl.principal.mapping.rules: Kafka's documented examples and its own SslPrincipalMapperTest cases give the same
principals, splits and refusals here."""

from __future__ import annotations

import pytest

from odradek.broker.security.principal_mapping import DEFAULT_RULES, NoMatchingRule, PrincipalMapper

# Kafka's documentation (Customizing SSL User Name), one rule a line as printed there.
DOCUMENTED_RULES = """RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,
RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,
RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,
DEFAULT"""


def test_the_documented_rules_give_the_documented_principals() -> None:
    mapper = PrincipalMapper.parse(DOCUMENTED_RULES)
    assert mapper.name("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown") == "serviceuser"
    assert mapper.name("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown") == "adminuser@admin"
    # The third rule catches a CN anywhere; DEFAULT keeps a DN without one whole.
    assert mapper.name("O=Acme,cn=Kafka1.Eng,C=US") == "kafka1.eng"
    assert mapper.name("OU=Eng,O=Acme,C=US") == "OU=Eng,O=Acme,C=US"


def test_kafkas_mapper_test_cases() -> None:
    rules = ", ".join(
        [
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
            "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
            "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
            "DEFAULT",
        ]
    )
    mapper = PrincipalMapper.parse(rules)
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


def test_an_escaped_comma_inside_a_cn() -> None:
    mapper = PrincipalMapper.parse(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ],
)
def test_kafkas_valid_rules_parse(rules: str) -> None:
    assert PrincipalMapper.parse(rules).rules


@pytest.mark.parametrize(
    "rules",
    [
        # Kafka's invalid rules.
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
        # Refused when parsed rather than when a certificate first meets them.
        "RULE:^CN=(.*$/$1/",  # not a regular expression
        "RULE:^CN=.*$/$1/",  # $1 with no group: Java's replaceAll would throw on every match
        "RULE:^CN=(.*)$/$/",  # a dangling $
        "RULE:^CN=(.*)$/x\\/",  # no closing slash: the escaped one belongs to the replacement
        "RULE:^CN=(?P<cn>.*)$/${name}/",  # no such named group
    ],
)
def test_bad_syntax_is_a_value_error(rules: str) -> None:
    with pytest.raises(ValueError, match=r"rule|replacement"):
        PrincipalMapper.parse(rules)


def kafka_str(mapper: PrincipalMapper) -> str:
    """The rule list as Kafka's SslPrincipalMapper.toString prints it, so that its splitting cases compare as
    written there."""
    out = []
    for rule in mapper.rules:
        if rule.pattern is None:
            out.append("DEFAULT")
        else:
            out.append(f"RULE:{rule.pattern}/{rule.replacement}" + (f"/{rule.case}" if rule.case else ""))
    return "[" + ", ".join(out) + "]"


@pytest.mark.parametrize(
    ("expected", "rules"),
    [
        ("[]", ""),
        ("[DEFAULT]", "DEFAULT"),
        ("[RULE:/]", "RULE://"),
        ("[RULE:/.*]", "RULE:/.*/"),
        ("[RULE:/.*/L]", "RULE:/.*/L"),
        ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
        ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
        ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
        ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
        ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]", "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
        # Empty rules are skipped.
        ("[]", ",   , , ,      , , ,   "),
        ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
        ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
        ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
        # Escapes.
        ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
        ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
        # Commas and the word RULE inside patterns and replacements.
        (
            "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
            "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT",
        ),
    ],
)
def test_rules_split_as_kafka_splits_them(expected: str, rules: str) -> None:
    assert kafka_str(PrincipalMapper.parse(rules)) == expected


def test_rules_apply_in_order_and_the_first_match_wins() -> None:
    dn = "CN=kafka1,OU=Eng,O=Acme,L=SF,ST=CA,C=US"
    assert PrincipalMapper.parse("RULE:^CN=([^,]*),.*$/$1/,DEFAULT").name(dn) == "kafka1"
    assert PrincipalMapper.parse("DEFAULT,RULE:^CN=([^,]*),.*$/$1/").name(dn) == dn
    # A rule that does not match lets the next one try.
    assert PrincipalMapper.parse("RULE:^CN=(.*),OU=Ops,.*$/ops-$1/,RULE:^CN=([^,]*),.*$/$1/").name(dn) == "kafka1"


def test_lower_and_upper_case() -> None:
    dn = "CN=Kafka1,OU=Eng,O=Acme,C=US"
    assert PrincipalMapper.parse("RULE:^CN=([^,]*),OU=([^,]*),.*$/$1.$2/").name(dn) == "Kafka1.Eng"
    assert PrincipalMapper.parse("RULE:^CN=([^,]*),OU=([^,]*),.*$/$1.$2/L").name(dn) == "kafka1.eng"
    assert PrincipalMapper.parse("RULE:^CN=([^,]*),OU=([^,]*),.*$/$1.$2/U").name(dn) == "KAFKA1.ENG"


def test_the_pattern_must_match_the_whole_dn() -> None:
    mapper = PrincipalMapper.parse("RULE:CN=([^,]*)/$1/")
    with pytest.raises(NoMatchingRule):
        mapper.name("CN=kafka1,OU=Eng")
    assert mapper.name("CN=kafka1") == "kafka1"


def test_the_default_rule_and_the_default_setting() -> None:
    dn = "CN=kafka1,OU=Eng,O=Acme,L=SF,ST=CA,C=US"
    assert PrincipalMapper.parse("DEFAULT").name(dn) == dn
    assert PrincipalMapper.parse(DEFAULT_RULES).name(dn) == dn


def test_references_to_missing_groups_stay_literal_and_escapes_apply() -> None:
    dn = "CN=kafka1,OU=Eng"
    # Two groups: $3 names none and stays as written (Kafka escapes it); $12 is group 1 then "2".
    assert PrincipalMapper.parse("RULE:^CN=([^,]*),OU=(.*)$/$1@$3/").name(dn) == "kafka1@$3"
    assert PrincipalMapper.parse("RULE:^CN=([^,]*),OU=(.*)$/$12/").name(dn) == "kafka12"
    # \$ is a dollar sign, \/ a slash; $0 is the whole match.
    assert PrincipalMapper.parse(r"RULE:^CN=([^,]*),OU=(.*)$/\$1\/$2/").name(dn) == "$1/Eng"
    assert PrincipalMapper.parse("RULE:^CN=([^,]*),.*$/<$0>/").name(dn) == "<CN=kafka1,OU=Eng>"
    assert PrincipalMapper.parse("RULE:^CN=(?P<cn>[^,]*),.*$/${cn}/").name(dn) == "kafka1"


def test_a_dn_that_no_rule_matches_has_no_principal() -> None:
    mapper = PrincipalMapper.parse("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    assert mapper.name("CN=serviceuser,OU=ServiceUsers,O=Unknown") == "serviceuser"
    with pytest.raises(NoMatchingRule, match="CN=adminUser,OU=Admin") as caught:
        mapper.name("CN=adminUser,OU=Admin,O=Unknown")
    assert isinstance(caught.value, ValueError)
    # No rules at all (an empty setting): nothing maps.
    with pytest.raises(NoMatchingRule):
        PrincipalMapper.parse("").name("CN=kafka1")
