"""forget/repository.py refuses a selection a table cannot be narrowed by, instead of erasing the
table's whole share of the namespace."""

from __future__ import annotations

import uuid

import pytest

from memvault.api import NamespaceAPI
from memvault.forget import repository as repo
from memvault.forget.repository import NotSelectable, Selection
from tests.conftest import Tenant


class TestNarrowing:
    async def test_a_selection_a_table_has_no_column_for_is_refused(self, api: NamespaceAPI, tenant_a: Tenant) -> None:
        namespace = uuid.uuid4()
        by_entity = Selection(tenant_a.id, namespace, "entity_id", uuid.uuid4())
        by_user = Selection(tenant_a.id, namespace, "user_id", "ana")
        async with api._db.tenant_tx(tenant_a.id) as tx:
            for erase in (repo.erase_events, repo.erase_sessions, repo.erase_traces):
                with pytest.raises(NotSelectable):
                    await erase(tx.session, by_entity)
            for erase in (repo.erase_relations, repo.erase_entities):
                with pytest.raises(NotSelectable):
                    await erase(tx.session, by_user)
